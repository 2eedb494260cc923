#pragma once

// Where a rank's part of a distributed step sits in what the ranks exchange (its
// share): its gradient stacks' blocks in plan order, each stack (count, rows,
// cols) as the engine holds it, then its AdamW segments. Every rank knows every
// rank's plan (distributed/work_split.h), so a share is written and read through
// views alone: no index of positions, no flat copy of all parameters.

#include "blocking/stack_plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash::distributed {

struct ShareLayout {
  std::vector<int64_t> stack_offsets;    ///< per gradient stack of the plan
  std::vector<int64_t> segment_offsets;  ///< per AdamW segment of the plan
  int64_t numel = 0;
};

ShareLayout share_layout(const blocking::StackPlan& plan);

/// Gradient stack s of `plan` in `share` (1-D, at least layout.numel elements), as
/// a (count, rows, cols) view.
at::Tensor stack_in_share(
    const at::Tensor& share, const ShareLayout& layout, const blocking::StackPlan& plan, size_t stack);

/// Parameter `param` of AdamW segment `segment` of `plan` in `share`, as a view of
/// the parameter's `shape`.
at::Tensor parameter_in_share(const at::Tensor& share, const ShareLayout& layout, const blocking::StackPlan& plan,
    size_t segment, int64_t param, at::IntArrayRef shape);

}  // namespace dash::distributed
