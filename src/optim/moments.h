#pragma once

// A stack's moments (MomentState: M, A, B_m and t), whole and by chunk: zero state,
// a chunk's part, and its float32 view for the arithmetic when the state is kept in
// bfloat16 (state_precision.h).

#include "kernels/scratch.h"
#include "optim/block_state.h"
#include "optim/rows.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash::optim {

/// Zero moments of shape (n, rows, cols) in `dtype`, the ones `hyper` uses (A for a
/// grafting type that keeps a statistic, B_m with momentum); t is kept in float32,
/// per block ((n, 1, 1)) or, for AdamW segments, per element.
MomentState zero_moments(const std::vector<int64_t>& shape, bool steps_per_block, const StepHyper& hyper,
    const at::TensorOptions& to, at::ScalarType dtype = at::kFloat);

/// The part of `full` that `rows` own (views, or copies for a scattered subset, in
/// buffers of `scratch` where given: Rows::take).
MomentState moments_of(const MomentState& full, const Rows& rows, kernels::Scratch* scratch = nullptr);

/// Writes back a part that moments_of() copied (nothing for views).
void put_moments(MomentState& full, const MomentState& part, const Rows& rows);

/// The moments as float32 for the step's arithmetic: the stored tensors where they
/// are float32, else copies in `scratch`.
MomentState widened_moments(const MomentState& stored, kernels::Scratch& scratch);

/// Rounds what the arithmetic made of widened_moments(stored) back into `stored`.
void store_rounded_moments(const MomentState& stored, const MomentState& computed);

}  // namespace dash::optim
