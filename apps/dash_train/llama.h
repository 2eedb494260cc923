#pragma once

// A Llama-style decoder (Touvron et al. 2023): pre-norm RMSNorm blocks, rotary
// position embeddings, causal multi-head attention, SwiGLU MLP, untied input
// embedding and output layer. No biases.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace dash_train {

struct LlamaConfig {
  int64_t vocab_size = 256;
  int64_t dim = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  /// Hidden width of the SwiGLU MLP; 0: 8/3 · dim rounded up to a multiple of 32.
  int64_t ffn_hidden = 0;
  int64_t max_seq_len = 128;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;

  int64_t hidden_width() const;
  /// Throws (TORCH_CHECK) naming the first field out of range.
  void check() const;
};

/// x · w / rms(x) (Zhang & Sennrich 2019).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);

 private:
  at::Tensor weight_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const LlamaConfig& config);
  /// x: (B, T, dim); cos, sin: (T, head_dim / 2) rotary tables; mask: (T, T), true above the diagonal.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask);

 private:
  int64_t heads_;
  torch::nn::Linear wq_{nullptr}, wk_{nullptr}, wv_{nullptr}, wo_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

/// w2(silu(w1 x) ⊙ w3 x) (Shazeer 2020).
class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t dim, int64_t hidden);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Linear w1_{nullptr}, w2_{nullptr}, w3_{nullptr};
};
TORCH_MODULE(SwiGLU);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask);

 private:
  RMSNorm attention_norm_{nullptr}, mlp_norm_{nullptr};
  CausalSelfAttention attention_{nullptr};
  SwiGLU mlp_{nullptr};
};
TORCH_MODULE(DecoderLayer);

class LlamaImpl : public torch::nn::Module {
 public:
  explicit LlamaImpl(const LlamaConfig& config);
  /// tokens: (B, T) int64 with T ≤ max_seq_len → logits (B, T, vocab_size).
  at::Tensor forward(const at::Tensor& tokens);
  const LlamaConfig& config() const { return config_; }
  /// Per tensor of parameters(): whether it is the embedding or the output layer,
  /// the matrices Muon's recipe keeps on AdamW (optimizer_factory.h).
  std::vector<bool> auxiliary_matrices() const;

 private:
  void initialise_weights();

  LlamaConfig config_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::ModuleList layers_;
  RMSNorm norm_{nullptr};
  torch::nn::Linear output_{nullptr};
  at::Tensor rope_cos_, rope_sin_, causal_mask_;
};
TORCH_MODULE(Llama);

}  // namespace dash_train
