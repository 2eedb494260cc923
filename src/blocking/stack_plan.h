#pragma once

// Where every block of every parameter lives (spec §2): gradient stacks group
// blocks of equal shape, factor stacks group factors of equal size, and every
// parameter has a fixed range of one flat buffer (used by the AdamW segments and
// the distributed exchange). Pure shape bookkeeping, computed once per optimizer.

#include "blocking/block_layout.h"
#include "blocking/block_regions.h"

#include <cstdint>
#include <vector>

namespace dash::blocking {

/// Per parameter group: what decides how its parameters are blocked.
struct GroupBlocking {
  int64_t block_size = 1024;
  bool shampoo_1d = false;    ///< 1-D parameters are preconditioned (else AdamW)
  int64_t root_override = 0;  ///< root per side; 0: 4 (matrices) or 2 (1-D Shampoo)
};

/// A parameter's place in the flat buffer.
struct ParameterSlot {
  int64_t group = 0;
  int64_t offset = 0;  ///< first element in the flat buffer
  int64_t numel = 0;
  MatrixView view;
  bool preconditioned = false;  ///< in gradient stacks (else in an AdamW segment)
};

/// Blocks of one shape (and one group); their L factors form one contiguous
/// segment of a factor stack and their R factors another.
struct GradientStack {
  int64_t group = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  bool one_sided = false;             ///< 1-D Shampoo: L only
  std::vector<int64_t> block_params;  ///< parameter index of each block
  std::vector<Block> blocks;          ///< where each block sits in its parameter's matrix view
  std::vector<BlockRegion> regions;   ///< the blocks merged into strided regions
  int64_t left_stack = -1;
  int64_t left_offset = 0;
  int64_t right_stack = -1;  ///< -1 when one-sided
  int64_t right_offset = 0;

  int64_t count() const { return static_cast<int64_t>(block_params.size()); }
};

/// Factors of one size and root (and one group), stacked (count, size, size).
struct FactorStack {
  int64_t group = 0;
  int64_t size = 0;
  int64_t root = 0;
  int64_t count = 0;
};

/// The AdamW-handled parameters of one group: a contiguous run of the flat buffer.
struct AdamWSegment {
  int64_t group = 0;
  int64_t offset = 0;
  int64_t numel = 0;
  std::vector<int64_t> params;
};

struct StackPlan {
  std::vector<ParameterSlot> parameters;
  std::vector<GradientStack> gradient_stacks;
  std::vector<FactorStack> factor_stacks;
  std::vector<AdamWSegment> adamw_segments;
  int64_t flat_numel = 0;
};

/// `shapes[i]` and `groups[i]` describe parameter i; `blocking[g]` group g.
StackPlan plan_stacks(const std::vector<std::vector<int64_t>>& shapes, const std::vector<int64_t>& groups,
    const std::vector<GroupBlocking>& blocking);

/// The flat-buffer positions of block `block` of `stack`, row-major within the block.
std::vector<int64_t> flat_positions(const StackPlan& plan, const GradientStack& stack, int64_t block);

/// How many blocks of `plan`'s gradient stacks each parameter has (0: none, an AdamW
/// or empty parameter, or, in a rank's plan, one whose blocks are other ranks').
std::vector<int64_t> blocks_per_parameter(const StackPlan& plan);

/// Each block's number among its parameter's blocks, per gradient stack and block:
/// a parameter's blocks numbered 0, 1, ... in stack order, then block order. For a
/// whole plan these numbers depend on the parameters and options only, not on the
/// world size, so they name a block's state in a checkpoint any world size reads.
std::vector<std::vector<int64_t>> parameter_block_numbers(const StackPlan& plan);

/// The part of `plan` one rank of a distributed optimizer works on (spec §6): the
/// blocks with keep_blocks[stack][block] and the AdamW segments with
/// keep_segments[segment]. Parameters and flat-buffer positions stay those of
/// `plan`; gradient stacks left empty are dropped and the factor stacks are
/// rebuilt for the blocks kept.
StackPlan restrict_plan(const StackPlan& plan, const std::vector<std::vector<bool>>& keep_blocks,
    const std::vector<bool>& keep_segments, const std::vector<GroupBlocking>& blocking);

}  // namespace dash::blocking
