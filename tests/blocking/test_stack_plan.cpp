// Stack planning: round trip of gradients through the stacks, grouping by shape,
// factor segments and AdamW segments.

#include "blocking/stack_plan.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

namespace dash::blocking {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{5, 3}, {3}, {2, 3, 3, 1}, {}, {4, 4}, {7}};

// Gathering every stack from a flat buffer of distinct values and scattering it
// back reproduces the preconditioned part of the buffer exactly, and no element is
// in two stacks.
TEST(StackPlan, GatherScatterRoundTrip) {
  auto plan = plan_stacks(kShapes, {0, 0, 0, 0, 1, 1}, {{2, false, 0}, {3, true, 0}});
  auto flat = at::arange(plan.flat_numel, at::kFloat);
  auto rebuilt = at::full({plan.flat_numel}, -1.0f);
  std::set<int64_t> seen;
  for (const auto& stack : plan.gradient_stacks) {
    std::vector<int64_t> positions;
    for (int64_t b = 0; b < stack.count(); ++b) {
      const auto block = flat_positions(plan, stack, b);
      positions.insert(positions.end(), block.begin(), block.end());
    }
    auto index = at::tensor(positions, at::kLong);
    auto blocks = flat.index_select(0, index).view({stack.count(), stack.rows, stack.cols});
    rebuilt.index_copy_(0, index, blocks.reshape(-1));
    for (auto i : positions) EXPECT_TRUE(seen.insert(i).second) << "element " << i << " twice";
  }
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const auto& slot = plan.parameters[i];
    auto part = rebuilt.narrow(0, slot.offset, slot.numel);
    if (slot.preconditioned) {
      EXPECT_TRUE(at::equal(part, flat.narrow(0, slot.offset, slot.numel))) << "parameter " << i;
    } else {
      EXPECT_TRUE((part == -1.0f).all().item<bool>()) << "parameter " << i;
    }
  }
}

// The strided regions move exactly the elements the flat positions name: a stack
// gathered region by region from each parameter's matrix equals the index_select
// of the flat positions, and scattering it back rebuilds every preconditioned
// parameter. Also for a rank's subset of the blocks (regions split around gaps).
void expect_regions_match_positions(const StackPlan& plan, const std::vector<std::vector<int64_t>>& shapes) {
  auto flat = at::arange(plan.flat_numel, at::kFloat);
  std::vector<at::Tensor> matrices;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& slot = plan.parameters[i];
    matrices.push_back(flat.narrow(0, slot.offset, slot.numel).view({slot.view.rows, slot.view.cols}));
  }
  for (const auto& stack : plan.gradient_stacks) {
    std::vector<int64_t> positions;
    for (int64_t b = 0; b < stack.count(); ++b) {
      const auto block = flat_positions(plan, stack, b);
      positions.insert(positions.end(), block.begin(), block.end());
    }
    auto expected =
        flat.index_select(0, at::tensor(positions, at::kLong)).view({stack.count(), stack.rows, stack.cols});
    auto gathered = at::full_like(expected, -1.0f);
    int64_t covered = 0;
    for (const auto& region : stack.regions) {
      EXPECT_EQ(region.first, covered) << "regions in stack order";
      covered += region.count();
      region_in_stack(gathered, region).copy_(region_in_matrix(matrices[region.param], region));
    }
    EXPECT_EQ(covered, stack.count());
    EXPECT_TRUE(at::equal(gathered, expected)) << "stack " << stack.rows << "x" << stack.cols;
    auto rebuilt = at::full({plan.flat_numel}, -1.0f);
    for (const auto& region : stack.regions) {
      const auto& slot = plan.parameters[region.param];
      auto target = rebuilt.narrow(0, slot.offset, slot.numel).view({slot.view.rows, slot.view.cols});
      region_in_matrix(target, region).copy_(region_in_stack(gathered, region));
    }
    auto index = at::tensor(positions, at::kLong);
    EXPECT_TRUE(at::equal(rebuilt.index_select(0, index), flat.index_select(0, index)));
    EXPECT_EQ((rebuilt != -1.0f).sum().item<int64_t>(), static_cast<int64_t>(positions.size()))
        << "nothing outside the stack's blocks is written";
  }
}

TEST(StackPlan, RegionsMoveTheSameElementsAsFlatPositions) {
  const std::vector<std::vector<int64_t>> shapes = {{9, 7}, {4, 8}, {2, 3, 3, 1}, {8, 4}, {5}};
  const std::vector<GroupBlocking> blocking = {{2, false, 0}, {4, true, 0}};
  const auto plan = plan_stacks(shapes, {0, 0, 0, 1, 1}, blocking);
  expect_regions_match_positions(plan, shapes);
  // Every other block kept, as a rank of a distributed optimizer might.
  std::vector<std::vector<bool>> keep;
  for (const auto& stack : plan.gradient_stacks) {
    auto& flags = keep.emplace_back();
    for (int64_t b = 0; b < stack.count(); ++b) flags.push_back(b % 3 != 1);
  }
  const auto part = restrict_plan(plan, keep, std::vector<bool>(plan.adamw_segments.size(), true), blocking);
  expect_regions_match_positions(part, shapes);
}

// A 9×7 matrix in 2×2 blocks: a 4×3 grid of full blocks is one region; the ragged
// column (4 blocks of 2×1), row (3 of 1×2) and corner are one region each.
TEST(StackPlan, TiledParameterIsOneRegionPerStack) {
  const auto plan = plan_stacks({{9, 7}}, {0}, {{2, false, 0}});
  std::map<std::pair<int64_t, int64_t>, std::vector<BlockRegion>> regions;
  for (const auto& stack : plan.gradient_stacks) regions[{stack.rows, stack.cols}] = stack.regions;
  ASSERT_EQ(regions.size(), 4u);
  ASSERT_EQ((regions[{2, 2}].size()), 1u);
  EXPECT_EQ((regions[{2, 2}][0].grid_rows), 4);
  EXPECT_EQ((regions[{2, 2}][0].grid_cols), 3);
  ASSERT_EQ((regions[{2, 1}].size()), 1u);
  EXPECT_EQ((regions[{2, 1}][0].col), 6);
  EXPECT_EQ((regions[{2, 1}][0].grid_rows), 4);
  ASSERT_EQ((regions[{1, 2}].size()), 1u);
  EXPECT_EQ((regions[{1, 2}][0].row), 8);
  EXPECT_EQ((regions[{1, 2}][0].grid_cols), 3);
  EXPECT_EQ((regions[{1, 1}].size()), 1u);
}

// Blocks are numbered 0..n−1 within each parameter, n its block count by hand
// ((5, 3) in 2×2 blocks: 3 × 2; (2,3,3,1) as 6×3: 3 × 2; (4, 4) in 3×3: 2 × 2;
// (7) 1-D in 3s: 3), each number once.
TEST(StackPlan, BlockNumbersCountEachParametersBlocksOnce) {
  const auto plan = plan_stacks(kShapes, {0, 0, 0, 0, 1, 1}, {{2, false, 0}, {3, true, 0}});
  const auto numbers = parameter_block_numbers(plan);
  ASSERT_EQ(numbers.size(), plan.gradient_stacks.size());
  std::map<int64_t, std::set<int64_t>> seen;
  for (size_t s = 0; s < numbers.size(); ++s) {
    ASSERT_EQ(static_cast<int64_t>(numbers[s].size()), plan.gradient_stacks[s].count());
    for (size_t b = 0; b < numbers[s].size(); ++b) {
      EXPECT_TRUE(seen[plan.gradient_stacks[s].block_params[b]].insert(numbers[s][b]).second);
    }
  }
  const std::map<int64_t, int64_t> expected_counts = {{0, 6}, {2, 6}, {4, 4}, {5, 3}};
  ASSERT_EQ(seen.size(), expected_counts.size());
  for (const auto& [param, count] : expected_counts) {
    ASSERT_EQ(static_cast<int64_t>(seen[param].size()), count) << "parameter " << param;
    EXPECT_EQ(*seen[param].begin(), 0);
    EXPECT_EQ(*seen[param].rbegin(), count - 1);
  }
}

TEST(StackPlan, StacksGroupEqualShapesAndFactorsEqualSizes) {
  // Group 0, B = 2: (5, 3) → blocks 2×2 ×2, 2×1 ×2, 1×2, 1×1; (2,3,3,1) → 6×3 →
  // 2×2 ×3, 2×1 ×3. Group 1, B = 3, 1-D Shampoo: (4, 4) → 3×3, 3×1, 1×3, 1×1;
  // (7) → segments 3, 3, 1 (one-sided).
  auto plan = plan_stacks(kShapes, {0, 0, 0, 0, 1, 1}, {{2, false, 0}, {3, true, 0}});
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, int64_t> counts;
  for (const auto& stack : plan.gradient_stacks) {
    counts[{stack.group, stack.rows, stack.cols, stack.one_sided}] = stack.count();
  }
  EXPECT_EQ((counts[{0, 2, 2, false}]), 5);
  EXPECT_EQ((counts[{0, 2, 1, false}]), 5);
  EXPECT_EQ((counts[{0, 1, 2, false}]), 1);
  EXPECT_EQ((counts[{1, 3, 1, true}]), 2);
  EXPECT_EQ((counts[{1, 1, 1, true}]), 1);
  // Factor stacks: group 0 size 2 holds L of 2×2 (5) + R of 2×2 (5) + L of 2×1 (5)
  // + R of 1×2 (1) = 16.
  for (const auto& factor : plan.factor_stacks) {
    if (factor.group == 0 && factor.size == 2) EXPECT_EQ(factor.count, 16);
    if (factor.group == 1 && factor.size == 3 && factor.root == 2) EXPECT_EQ(factor.count, 2);
  }
  // Every gradient stack's factor segments fit inside their stacks, without overlap.
  std::set<std::tuple<int64_t, int64_t>> used;
  for (const auto& stack : plan.gradient_stacks) {
    for (int64_t b = 0; b < stack.count(); ++b) {
      EXPECT_TRUE(used.insert({stack.left_stack, stack.left_offset + b}).second);
      EXPECT_EQ(plan.factor_stacks[stack.left_stack].size, stack.rows);
      if (!stack.one_sided) {
        EXPECT_TRUE(used.insert({stack.right_stack, stack.right_offset + b}).second);
        EXPECT_EQ(plan.factor_stacks[stack.right_stack].size, stack.cols);
      }
    }
  }
}

TEST(StackPlan, AdamWSegmentsAreContiguousPerGroup) {
  auto plan = plan_stacks(kShapes, {0, 0, 0, 0, 1, 1}, {{2, false, 0}, {3, true, 0}});
  ASSERT_EQ(plan.adamw_segments.size(), 1u);  // group 1 preconditions its 1-D parameter
  const auto& segment = plan.adamw_segments[0];
  EXPECT_EQ(segment.params, (std::vector<int64_t>{1, 3}));  // the (3) vector and the scalar
  EXPECT_EQ(segment.numel, 4);
  EXPECT_EQ(plan.parameters[1].offset, segment.offset);
  EXPECT_EQ(plan.parameters[3].offset, segment.offset + 3);
}

// Matrices get root 4 per side, 1-D Shampoo segments root 2; an override replaces both.
TEST(StackPlan, RootOverrideAndOneSidedRoots) {
  auto plan = plan_stacks({{4, 4}, {5}}, {0, 0}, {{4, true, 0}});
  std::set<std::tuple<int64_t, int64_t, int64_t>> stacks;  // (size, root, count)
  for (const auto& factor : plan.factor_stacks) stacks.insert({factor.size, factor.root, factor.count});
  EXPECT_EQ(stacks, (std::set<std::tuple<int64_t, int64_t, int64_t>>{{4, 4, 2}, {4, 2, 1}, {1, 2, 1}}));
  auto overridden = plan_stacks({{4, 4}}, {0}, {{4, false, 2}});
  EXPECT_EQ(overridden.factor_stacks[0].root, 2);
}

// The blocks' parameter elements for a list of blocks: moved through the pieces of
// regions_of_blocks() into a compact buffer, they are the listed blocks of the
// full stack, in order; a piece is one rectangle of its region; a list of every
// block gives back the regions themselves.
void expect_pieces_gather_blocks(
    const StackPlan& plan, const GradientStack& stack, const std::vector<int64_t>& blocks) {
  auto flat = at::arange(plan.flat_numel, at::kFloat);
  auto matrix_of = [&](int64_t param) {
    const auto& slot = plan.parameters[param];
    return flat.narrow(0, slot.offset, slot.numel).view({slot.view.rows, slot.view.cols});
  };
  auto full = at::full({stack.count(), stack.rows, stack.cols}, -1.0f);
  for (const auto& region : stack.regions)
    region_in_stack(full, region).copy_(region_in_matrix(matrix_of(region.param), region));
  const auto pieces = regions_of_blocks(stack.regions, blocks);
  auto compact = at::full({static_cast<int64_t>(blocks.size()), stack.rows, stack.cols}, -1.0f);
  int64_t covered = 0;
  for (const auto& piece : pieces) {
    EXPECT_EQ(piece.first, covered) << "pieces in the list's order";
    covered += piece.count();
    EXPECT_EQ(piece.block_rows, stack.rows);
    EXPECT_EQ(piece.block_cols, stack.cols);
    region_in_stack(compact, piece).copy_(region_in_matrix(matrix_of(piece.param), piece));
  }
  ASSERT_EQ(covered, static_cast<int64_t>(blocks.size()));
  EXPECT_TRUE(at::equal(compact, full.index_select(0, at::tensor(blocks, at::kLong))))
      << "stack " << stack.rows << "x" << stack.cols << ", " << blocks.size() << " blocks";
}

TEST(StackPlan, PiecesOfRegionsMoveTheListedBlocks) {
  // Two tiled matrices (one region each, 4×3 and 3×5 grids of 2×2) and ragged edges.
  const auto plan = plan_stacks({{9, 7}, {6, 10}, {2, 3, 3, 1}}, {0, 0, 0}, {{2, false, 0}});
  for (const auto& stack : plan.gradient_stacks) {
    const int64_t n = stack.count();
    std::vector<int64_t> all(n);
    for (int64_t b = 0; b < n; ++b) all[b] = b;
    expect_pieces_gather_blocks(plan, stack, all);
    const auto whole = regions_of_blocks(stack.regions, all);
    ASSERT_EQ(whole.size(), stack.regions.size()) << "every block: the regions, uncut";
    for (size_t r = 0; r < whole.size(); ++r) EXPECT_EQ(whole[r].count(), stack.regions[r].count());
    for (int64_t start = 0; start < n; ++start) {  // every range, as chunks are
      for (int64_t length = 1; start + length <= n; ++length) {
        std::vector<int64_t> range(all.begin() + start, all.begin() + start + length);
        expect_pieces_gather_blocks(plan, stack, range);
      }
    }
    std::vector<int64_t> scattered;  // as the blocks with a gradient might be
    for (int64_t b = 0; b < n; ++b) {
      if (b % 3 != 1) scattered.push_back(b);
    }
    if (!scattered.empty()) expect_pieces_gather_blocks(plan, stack, scattered);
  }
}

// A run inside one region's grid is at most three rectangles: the rest of a row,
// whole rows, the start of a row.
TEST(StackPlan, ARunWithinARegionIsAtMostThreePieces) {
  const auto plan = plan_stacks({{10, 10}}, {0}, {{2, false, 0}});  // one 5×5 grid of 2×2
  const auto& stack = plan.gradient_stacks.at(0);
  ASSERT_EQ(stack.regions.size(), 1u);
  std::vector<int64_t> run;
  for (int64_t b = 3; b < 22; ++b) run.push_back(b);  // row 0 from column 3, rows 1–3, row 4 to column 1
  const auto pieces = regions_of_blocks(stack.regions, run);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].grid_rows * 10 + pieces[0].grid_cols, 1 * 10 + 2);
  EXPECT_EQ(pieces[1].grid_rows * 10 + pieces[1].grid_cols, 3 * 10 + 5);
  EXPECT_EQ(pieces[2].grid_rows * 10 + pieces[2].grid_cols, 1 * 10 + 2);
  EXPECT_EQ(pieces[1].row, 2);
  EXPECT_EQ(pieces[2].row, 8);
  EXPECT_EQ(pieces[0].col, 6);
  expect_pieces_gather_blocks(plan, stack, run);
}

TEST(StackPlan, PiecesRefuseUnorderedOrUnknownBlocks) {
  const auto plan = plan_stacks({{4, 4}}, {0}, {{2, false, 0}});
  const auto& regions = plan.gradient_stacks.at(0).regions;
  EXPECT_THROW(regions_of_blocks(regions, {2, 1}), c10::Error);
  EXPECT_THROW(regions_of_blocks(regions, {4}), c10::Error);
}

}  // namespace
}  // namespace dash::blocking
