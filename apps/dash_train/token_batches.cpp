#include "token_batches.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <random>

namespace dash_train {
namespace {

// SplitMix64 finaliser: decorrelates nearby (seed, step, rank) triples.
uint64_t mix(uint64_t value) {
  value += 0x9E3779B97F4A7C15ULL;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ULL;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBULL;
  return value ^ (value >> 31);
}

TokenBatch windows_at(const at::Tensor& tokens, const std::vector<int64_t>& starts, int64_t seq_len) {
  auto start_tensor = at::tensor(starts, at::kLong).to(tokens.device());
  auto index = start_tensor.unsqueeze(1) + at::arange(seq_len + 1, start_tensor.options()).unsqueeze(0);
  auto windows = tokens.index_select(0, index.flatten()).view(index.sizes()).to(at::kLong);
  return {windows.narrow(1, 0, seq_len), windows.narrow(1, 1, seq_len)};
}

void check_tokens(const at::Tensor& tokens, int64_t batch_size, int64_t seq_len) {
  TORCH_CHECK(tokens.dim() == 1, "token batches: expected a 1-D token tensor, got ", tokens.dim(), " dimensions");
  TORCH_CHECK(batch_size >= 1 && seq_len >= 1, "token batches: batch_size and seq_len must be ≥ 1, got ", batch_size,
      " and ", seq_len);
  TORCH_CHECK(tokens.numel() >= seq_len + 1, "token batches: ", tokens.numel(),
      " tokens are fewer than one window of seq_len + 1 = ", seq_len + 1);
}

}  // namespace

TokenBatch training_batch(const at::Tensor& tokens, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t step,
    int64_t rank, int64_t world_size) {
  check_tokens(tokens, batch_size, seq_len);
  TORCH_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "training_batch: rank ", rank,
      " is outside world size ", world_size);
  const int64_t shard = tokens.numel() / world_size;
  TORCH_CHECK(shard >= seq_len + 1, "training_batch: ", tokens.numel(), " tokens split over ", world_size,
      " ranks leave shards shorter than one window (", seq_len + 1, ")");
  const int64_t shard_begin = rank * shard;
  std::mt19937_64 generator(mix(mix(mix(seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(rank)));
  std::uniform_int_distribution<int64_t> start(shard_begin, shard_begin + shard - seq_len - 1);
  std::vector<int64_t> starts(static_cast<size_t>(batch_size));
  for (auto& value : starts) value = start(generator);
  return windows_at(tokens, starts, seq_len);
}

std::vector<TokenBatch> validation_batches(
    const at::Tensor& tokens, int64_t batch_size, int64_t seq_len, int64_t batches) {
  check_tokens(tokens, batch_size, seq_len);
  TORCH_CHECK(batches >= 1, "validation_batches: batches must be ≥ 1, got ", batches);
  const int64_t windows = batches * batch_size;
  const int64_t last_start = tokens.numel() - seq_len - 1;
  std::vector<TokenBatch> result;
  result.reserve(static_cast<size_t>(batches));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> starts(static_cast<size_t>(batch_size));
    for (int64_t i = 0; i < batch_size; ++i) {
      const int64_t window = b * batch_size + i;
      starts[static_cast<size_t>(i)] = windows == 1 ? 0 : window * last_start / (windows - 1);
    }
    result.push_back(windows_at(tokens, starts, seq_len));
  }
  return result;
}

}  // namespace dash_train
