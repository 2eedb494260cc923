// The dash-train model: shapes, causality, rotary embeddings, config checks.

#include "llama.h"
#include "support/error_message.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

namespace dash_train {
namespace {

using dash::testing::error_of;

LlamaConfig small_model() {
  LlamaConfig config;
  config.dim = 32;
  config.layers = 2;
  config.heads = 4;
  config.max_seq_len = 24;
  return config;
}

TEST(Llama, LogitsHaveOneRowPerPositionOverTheVocabulary) {
  torch::manual_seed(0);
  Llama model(small_model());
  const auto tokens = at::randint(0, 256, {3, 24}, at::kLong);
  const auto logits = model->forward(tokens);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{3, 24, 256}));
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
  // SwiGLU width default: 8/3 · 32 = 85.3 → 96.
  EXPECT_EQ(small_model().hidden_width(), 96);
}

TEST(Llama, FutureTokensDoNotChangeEarlierLogits) {
  torch::manual_seed(1);
  Llama model(small_model());
  const auto tokens = at::randint(0, 256, {2, 24}, at::kLong);
  auto changed = tokens.clone();
  const int64_t cut = 10;
  changed.narrow(1, cut, 24 - cut).random_(0, 256);
  const auto original = model->forward(tokens);
  const auto altered = model->forward(changed);
  EXPECT_TRUE(at::equal(original.narrow(1, 0, cut), altered.narrow(1, 0, cut)))
      << "positions before " << cut << " saw the future";
  // ... and the positions that can see the change do change (the test can fail).
  EXPECT_GT((original.narrow(1, cut, 24 - cut) - altered.narrow(1, cut, 24 - cut)).abs().max().item<double>(), 1e-4);
}

TEST(Llama, ShorterSequencesGiveTheSameLogitsAsTheirPrefix) {
  // The rotary tables and the causal mask are sliced, not recomputed per length.
  torch::manual_seed(2);
  Llama model(small_model());
  const auto tokens = at::randint(0, 256, {1, 24}, at::kLong);
  const auto full = model->forward(tokens);
  const auto prefix = model->forward(tokens.narrow(1, 0, 7));
  EXPECT_TRUE(at::allclose(prefix, full.narrow(1, 0, 7), 1e-5, 1e-5));
}

TEST(Llama, OrderOfEarlierTokensMattersThroughRotaryEmbeddings) {
  // Attention without position information is blind to the order of the prefix:
  // with one layer, swapping two earlier tokens would leave the last position's
  // logits unchanged up to rounding.
  torch::manual_seed(3);
  auto config = small_model();
  config.layers = 1;
  Llama model(config);
  const auto tokens = at::randint(0, 256, {1, 24}, at::kLong);
  auto swapped = tokens.clone();
  swapped[0][0] = tokens[0][5];
  swapped[0][5] = tokens[0][0];
  ASSERT_FALSE(at::equal(tokens, swapped));
  const auto last = model->forward(tokens)[0][23];
  const auto last_swapped = model->forward(swapped)[0][23];
  EXPECT_GT((last - last_swapped).abs().max().item<double>(), 1e-4);
}

TEST(Llama, BadConfigurationsAndInputsGetClearErrors) {
  auto config = small_model();
  config.heads = 5;
  EXPECT_THAT(error_of([&] { Llama model(config); }), ::testing::HasSubstr("heads"));
  config = small_model();
  config.dim = 36;
  config.heads = 6;  // head width 6 is even: fine; 36/4 = 9 would be odd
  EXPECT_NO_THROW(Llama model(config));
  config.heads = 4;
  EXPECT_THAT(error_of([&] { Llama model(config); }), ::testing::HasSubstr("must be even"));
  Llama model(small_model());
  EXPECT_THAT(error_of([&] { model->forward(at::zeros({1, 25}, at::kLong)); }), ::testing::HasSubstr("max_seq_len"));
}

}  // namespace
}  // namespace dash_train
