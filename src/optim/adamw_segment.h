#pragma once

// The 1-D parameters' path (spec §4, "AdamW for 1-D parameters"): a group's 1-D
// parameters packed end to end into one segment, stepped by the grafting
// arithmetic with AdamW's hyper-parameters and per-element step counts.

#include <dash/optimizer_options.h>

#include "blocking/stack_plan.h"
#include "optim/block_state.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <vector>

namespace dash::optim {

struct AdamWSegmentState {
  MomentState moments;  ///< (1, 1, numel) tensors; steps per element
  Workspace work;       ///< reused by every step (ghat, graft); not state, not saved
  /// 1 − β^t of each element, rewritten in place at each step; not state, not saved.
  at::Tensor grad_correction{};
  at::Tensor stat_correction{};
  /// During a step, the moments and t of the parameters without a gradient, to be
  /// put back (one flat buffer per moment, in moment_fields' order, grown to the most
  /// such elements so far); not state, not saved.
  std::array<at::Tensor, 4> kept_without_gradient{};
};

/// A segment's zero state for a group with `options`.
AdamWSegmentState zero_adamw_segment(
    const blocking::AdamWSegment& segment, const DashOptions& options, const at::TensorOptions& to);

/// One step of `segment`: `grad` is its packed gradient (1, 1, numel), `has_grad`
/// per parameter of the plan (`slots`). The parameters without a gradient keep their
/// moments and t. Writes lr · P into `update` (numel).
void step_adamw_segment(const blocking::AdamWSegment& segment, const std::vector<blocking::ParameterSlot>& slots,
    const std::vector<bool>& has_grad, const DashOptions& options, const at::Tensor& grad, AdamWSegmentState& state,
    at::Tensor update);

}  // namespace dash::optim
