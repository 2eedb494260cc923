#include "llama.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>

namespace dash_train {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

/// Rotary embedding (Su et al. 2021, RoFormer eq. 34), half-split pairing: feature i
/// is rotated with feature i + head_dim/2 by angle t · θ^{-2i/head_dim}.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const auto x1 = x.narrow(-1, 0, half);
  const auto x2 = x.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

}  // namespace

int64_t LlamaConfig::hidden_width() const {
  if (ffn_hidden > 0) return ffn_hidden;
  const int64_t raw = (8 * dim + 2) / 3;
  return (raw + 31) / 32 * 32;
}

void LlamaConfig::check() const {
  TORCH_CHECK(vocab_size >= 2, "model: vocab_size must be ≥ 2, got ", vocab_size);
  TORCH_CHECK(dim >= 2, "model: dim must be ≥ 2, got ", dim);
  TORCH_CHECK(layers >= 1, "model: layers must be ≥ 1, got ", layers);
  TORCH_CHECK(heads >= 1 && dim % heads == 0, "model: heads must be ≥ 1 and divide dim ", dim, ", got ", heads);
  TORCH_CHECK((dim / heads) % 2 == 0, "model: the head width dim / heads = ", dim / heads,
      " must be even for rotary embeddings");
  TORCH_CHECK(ffn_hidden >= 0, "model: ffn_hidden must be ≥ 0 (0: 8/3 · dim), got ", ffn_hidden);
  TORCH_CHECK(max_seq_len >= 1, "model: max_seq_len must be ≥ 1, got ", max_seq_len);
  TORCH_CHECK(rope_theta > 1.0, "model: rope_theta must be > 1, got ", rope_theta);
  TORCH_CHECK(norm_eps > 0.0, "model: norm_eps must be > 0, got ", norm_eps);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_) * weight_;
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const LlamaConfig& config) : heads_(config.heads) {
  wq_ = register_module("wq", linear(config.dim, config.dim));
  wk_ = register_module("wk", linear(config.dim, config.dim));
  wv_ = register_module("wv", linear(config.dim, config.dim));
  wo_ = register_module("wo", linear(config.dim, config.dim));
}

at::Tensor CausalSelfAttentionImpl::forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask) {
  const int64_t batch = x.size(0), length = x.size(1), dim = x.size(2);
  const int64_t head_dim = dim / heads_;
  auto heads = [&](const at::Tensor& projected) {
    return projected.view({batch, length, heads_, head_dim}).transpose(1, 2);  // (B, H, T, hd)
  };
  const auto q = rotate(heads(wq_(x)), cos, sin);
  const auto k = rotate(heads(wk_(x)), cos, sin);
  const auto v = heads(wv_(x));
  auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  const auto attended = at::matmul(at::softmax(scores, -1), v);  // (B, H, T, hd)
  return wo_(attended.transpose(1, 2).reshape({batch, length, dim}));
}

SwiGLUImpl::SwiGLUImpl(int64_t dim, int64_t hidden) {
  w1_ = register_module("w1", linear(dim, hidden));
  w2_ = register_module("w2", linear(hidden, dim));
  w3_ = register_module("w3", linear(dim, hidden));
}

at::Tensor SwiGLUImpl::forward(const at::Tensor& x) { return w2_(at::silu(w1_(x)) * w3_(x)); }

DecoderLayerImpl::DecoderLayerImpl(const LlamaConfig& config) {
  attention_norm_ = register_module("attention_norm", RMSNorm(config.dim, config.norm_eps));
  attention_ = register_module("attention", CausalSelfAttention(config));
  mlp_norm_ = register_module("mlp_norm", RMSNorm(config.dim, config.norm_eps));
  mlp_ = register_module("mlp", SwiGLU(config.dim, config.hidden_width()));
}

at::Tensor DecoderLayerImpl::forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask) {
  const auto h = x + attention_(attention_norm_(x), cos, sin, mask);
  return h + mlp_(mlp_norm_(h));
}

LlamaImpl::LlamaImpl(const LlamaConfig& config) : config_(config) {
  config_.check();
  embedding_ = register_module("embedding", torch::nn::Embedding(config.vocab_size, config.dim));
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.layers; ++i) layers_->push_back(DecoderLayer(config));
  norm_ = register_module("norm", RMSNorm(config.dim, config.norm_eps));
  output_ = register_module("output", linear(config.dim, config.vocab_size));

  const int64_t head_dim = config.dim / config.heads;
  const auto inverse_frequency =
      at::pow(config.rope_theta, -at::arange(0, head_dim, 2, at::kDouble) / static_cast<double>(head_dim));
  const auto angles = at::outer(at::arange(config.max_seq_len, at::kDouble), inverse_frequency);
  rope_cos_ = register_buffer("rope_cos", angles.cos().to(at::kFloat));
  rope_sin_ = register_buffer("rope_sin", angles.sin().to(at::kFloat));
  causal_mask_ = register_buffer(
      "causal_mask", at::ones({config.max_seq_len, config.max_seq_len}, at::kBool).triu(/*diagonal=*/1));
  initialise_weights();
}

void LlamaImpl::initialise_weights() {
  // GPT-2 / Llama practice: N(0, 0.02), with the projections that write into the
  // residual stream scaled by 1/√(2 · layers) so its variance does not grow with depth.
  at::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers));
  for (auto& named : named_parameters()) {
    if (named.value().dim() < 2) continue;
    const auto& name = named.key();
    const bool residual = name.find("attention.wo") != std::string::npos || name.find("mlp.w2") != std::string::npos;
    torch::nn::init::normal_(named.value(), 0.0, residual ? residual_std : 0.02);
  }
}

std::vector<bool> LlamaImpl::auxiliary_matrices() const {
  std::vector<bool> auxiliary;
  for (const auto& named : named_parameters()) {
    auxiliary.push_back(named.key() == "embedding.weight" || named.key() == "output.weight");
  }
  return auxiliary;
}

at::Tensor LlamaImpl::forward(const at::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "Llama: expected (batch, length) token ids, got ", tokens.dim(), " dimensions");
  const int64_t length = tokens.size(1);
  TORCH_CHECK(length >= 1 && length <= config_.max_seq_len, "Llama: sequence length ", length,
      " is outside [1, max_seq_len = ", config_.max_seq_len, "]");
  const auto cos = rope_cos_.narrow(0, 0, length);
  const auto sin = rope_sin_.narrow(0, 0, length);
  const auto mask = causal_mask_.narrow(0, 0, length).narrow(1, 0, length);
  auto x = embedding_(tokens);
  for (const auto& layer : *layers_) x = layer->as<DecoderLayer>()->forward(x, cos, sin, mask);
  return output_(norm_(x));
}

}  // namespace dash_train
