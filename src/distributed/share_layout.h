#pragma once

// Where a rank's part of a distributed step sits in what the ranks exchange (its
// share): its gradient stacks' blocks in plan order, each stack (count, rows,
// cols) as the engine holds it, then its AdamW segments. Every rank knows every
// rank's plan (distributed/work_split.h), so a share is written and read through
// views alone: no index of positions, no flat copy of all parameters. Within a
// workspace limit the shares travel in rounds, cut at block and parameter
// boundaries so that each round's part is read back through views too.

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

/// One piece of a share: a run of consecutive blocks of one gradient stack (segment
/// −1), or one AdamW parameter of a segment (stack −1).
struct SharePiece {
  int64_t stack = -1;
  int64_t first_block = 0;
  int64_t blocks = 0;
  int64_t segment = -1;
  int64_t param = -1;
  int64_t offset = 0;  ///< in the share
  int64_t numel = 0;
};

/// The pieces of `plan`'s share within [begin, end), in share order: runs of whole
/// blocks, and AdamW parameters of at least one element.
std::vector<SharePiece> pieces_in(
    const blocking::StackPlan& plan, const ShareLayout& layout, int64_t begin, int64_t end);

/// A step's exchange in rounds: round k carries range k of every rank's share,
/// ranges[k][r] = [begin, end) (empty where rank r has fewer ranges), each at most
/// `numel` elements.
struct ShareRounds {
  int64_t numel = 0;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges;
};

/// Every rank's share cut into ranges of at most `round_numel` elements at block and
/// parameter boundaries (a block or parameter larger than that is a range of its
/// own, and `numel` grows to fit it); one round of whole shares for 0.
ShareRounds share_rounds(
    const std::vector<blocking::StackPlan>& plans, const std::vector<ShareLayout>& layouts, int64_t round_numel);

}  // namespace dash::distributed
