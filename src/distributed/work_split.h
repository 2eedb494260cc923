#pragma once

// Which rank works on which block (spec §6): a cost model and greedy
// longest-processing-time-first assignment. Pure functions of the plan and the
// world size, so every rank computes the same split without communicating.

#include "blocking/stack_plan.h"

#include <cstdint>
#include <vector>

namespace dash::distributed {

/// Relative work of one block per step: the inverse roots, ∝ b³ per factor, plus
/// the preconditioning L̄ G R̄, ∝ b_r·b_c·(b_r + b_c). One-sided (1-D Shampoo)
/// blocks have one factor and one product.
double block_cost(int64_t rows, int64_t cols, bool one_sided);

/// Relative work of an AdamW segment: elementwise, ∝ its size.
double segment_cost(int64_t numel);

/// Greedy LPT (Graham 1969): items by decreasing cost (ties: lower index first),
/// each to the least-loaded rank (ties: lower rank). Returns each item's rank.
std::vector<int64_t> longest_processing_time_first(const std::vector<double>& costs, int64_t ranks);

struct WorkSplit {
  std::vector<std::vector<int64_t>> block_owner;  ///< per gradient stack, per block
  std::vector<int64_t> segment_owner;             ///< per AdamW segment
  std::vector<double> load;                       ///< total cost per rank
};

WorkSplit split_work(const blocking::StackPlan& plan, int64_t world_size);

/// The plan restricted to `rank`'s blocks and segments.
blocking::StackPlan plan_for_rank(const blocking::StackPlan& plan, const WorkSplit& split, int64_t rank,
    const std::vector<blocking::GroupBlocking>& blocking);

/// Where the stacks of plan_for_rank(plan, split, rank, ...) come from: per gradient
/// stack, the stack of `plan` it restricts and its blocks' numbers there; per AdamW
/// segment, the segment of `plan` it is. What a checkpoint written on one world size
/// needs to be read on another.
struct RankOrigin {
  std::vector<int64_t> stacks;
  std::vector<std::vector<int64_t>> blocks;
  std::vector<int64_t> segments;
};

RankOrigin rank_origin(const blocking::StackPlan& plan, const WorkSplit& split, int64_t rank);

}  // namespace dash::distributed
