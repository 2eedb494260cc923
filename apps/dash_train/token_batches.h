#pragma once

// Batches of token windows: inputs x[t..t+T) and targets x[t+1..t+T+1).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash_train {

struct TokenBatch {
  at::Tensor inputs;   ///< (batch, seq_len) int64
  at::Tensor targets;  ///< (batch, seq_len) int64, inputs shifted by one
};

/// The training batch of `step` on data-parallel `rank` of `world_size`: window
/// starts drawn uniformly from the rank's contiguous 1/world_size shard of `tokens`
/// by a generator seeded from (seed, step, rank). A pure function of its arguments,
/// so a resumed run sees the same batches as an uninterrupted one.
TokenBatch training_batch(const at::Tensor& tokens, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t step,
    int64_t rank = 0, int64_t world_size = 1);

/// `batches` batches of windows evenly spaced over `tokens` (deterministic; windows
/// overlap when the split is shorter than batches · batch_size · seq_len).
std::vector<TokenBatch> validation_batches(
    const at::Tensor& tokens, int64_t batch_size, int64_t seq_len, int64_t batches);

}  // namespace dash_train
