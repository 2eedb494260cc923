// The distributed work split: cost model, LPT assignment, per-rank plans.

#include "distributed/work_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace dash::distributed {
namespace {

blocking::StackPlan example_plan(int64_t block_size = 32) {
  const std::vector<std::vector<int64_t>> shapes = {{70, 40}, {32, 32}, {48, 20}, {16}, {64, 32}, {}};
  return blocking::plan_stacks(shapes, std::vector<int64_t>(shapes.size(), 0), {{block_size, false, 0}});
}

TEST(CostModel, RootsGrowWithTheCubeAndPreconditioningWithTheProduct) {
  EXPECT_DOUBLE_EQ(block_cost(4, 2, false), 64 + 8 + 4 * 2 * 6);
  EXPECT_DOUBLE_EQ(block_cost(4, 2, true), 64 + 16 * 2);
  EXPECT_DOUBLE_EQ(block_cost(8, 8, false), 8 * block_cost(4, 4, false));
  EXPECT_DOUBLE_EQ(segment_cost(100), 100);
}

TEST(LongestProcessingTimeFirst, MatchesAHandWorkedAssignment) {
  // Sorted 5, 4, 3a, 3b, 3c: 5 → r0, 4 → r1, 3a → r1 (4 < 5), 3b → r0 (5 < 7), 3c → r1 (7 < 8).
  const std::vector<double> costs = {3, 5, 3, 4, 3};
  EXPECT_EQ(longest_processing_time_first(costs, 2), (std::vector<int64_t>{1, 0, 0, 1, 1}));
  EXPECT_EQ(longest_processing_time_first(costs, 1), (std::vector<int64_t>(5, 0)));
  // More ranks than items: one item each, the rest idle.
  EXPECT_EQ(longest_processing_time_first({2, 1}, 4), (std::vector<int64_t>{0, 1}));
}

TEST(LongestProcessingTimeFirst, IsWithinGrahamsBoundOfTheOptimum) {
  // LPT's makespan ≤ (4/3 − 1/(3m)) · optimum, and optimum ≥ max(total/m, largest).
  std::vector<double> costs;
  for (int i = 1; i <= 40; ++i) costs.push_back(static_cast<double>((i * 37) % 23 + 1));
  for (int64_t ranks : {2, 3, 5}) {
    const auto owner = longest_processing_time_first(costs, ranks);
    std::vector<double> load(static_cast<size_t>(ranks), 0.0);
    for (size_t i = 0; i < costs.size(); ++i) load[static_cast<size_t>(owner[i])] += costs[i];
    const double lower = std::max(std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(ranks),
        *std::max_element(costs.begin(), costs.end()));
    const double bound = (4.0 / 3.0 - 1.0 / (3.0 * static_cast<double>(ranks))) * lower;
    EXPECT_LE(*std::max_element(load.begin(), load.end()), bound) << ranks << " ranks";
  }
}

TEST(WorkSplit, EveryPositionIsOwnedByExactlyOneRank) {
  const auto plan = example_plan();
  const std::vector<blocking::GroupBlocking> blocking = {{32, false, 0}};
  for (int64_t ranks : {1, 2, 3, 7, 40}) {
    const auto split = split_work(plan, ranks);
    std::vector<int> owners(static_cast<size_t>(plan.flat_numel), 0);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const auto part = plan_for_rank(plan, split, rank, blocking);
      for (const auto& stack : part.gradient_stacks) {
        for (int64_t b = 0; b < stack.count(); ++b) {
          for (const auto position : blocking::flat_positions(part, stack, b)) ++owners[static_cast<size_t>(position)];
        }
      }
      for (const auto& segment : part.adamw_segments) {
        for (int64_t i = 0; i < segment.numel; ++i) ++owners[static_cast<size_t>(segment.offset + i)];
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) ASSERT_EQ(owners[i], 1) << "position " << i << ", " << ranks << " ranks";
    EXPECT_EQ(split_work(plan, ranks).block_owner, split.block_owner) << "deterministic";
  }
}

TEST(WorkSplit, RankPlansPartitionTheBlocksAndRebuildTheirFactorStacks) {
  const auto plan = example_plan();
  const std::vector<blocking::GroupBlocking> blocking = {{32, false, 0}};
  const int64_t ranks = 3;
  const auto split = split_work(plan, ranks);
  std::multiset<std::vector<int64_t>> all_blocks, ranked_blocks;
  int64_t factors = 0, ranked_factors = 0;
  for (const auto& stack : plan.gradient_stacks) {
    for (int64_t b = 0; b < stack.count(); ++b) {
      all_blocks.insert(blocking::flat_positions(plan, stack, b));
    }
  }
  for (const auto& stack : plan.factor_stacks) factors += stack.count;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const auto part = plan_for_rank(plan, split, rank, blocking);
    EXPECT_EQ(part.flat_numel, plan.flat_numel);
    for (const auto& stack : part.gradient_stacks) {
      EXPECT_GT(stack.count(), 0);
      for (int64_t b = 0; b < stack.count(); ++b) {
        ranked_blocks.insert(blocking::flat_positions(part, stack, b));
      }
      // The factor offsets point into this rank's own (smaller) factor stacks.
      EXPECT_LE(stack.left_offset + stack.count(), part.factor_stacks[stack.left_stack].count);
      EXPECT_EQ(part.factor_stacks[stack.left_stack].size, stack.rows);
    }
    for (const auto& stack : part.factor_stacks) ranked_factors += stack.count;
  }
  EXPECT_EQ(ranked_blocks, all_blocks);
  EXPECT_EQ(ranked_factors, factors);
  // The loads are balanced: the heaviest rank carries at most the largest block more than the lightest.
  const auto [lightest, heaviest] = std::minmax_element(split.load.begin(), split.load.end());
  EXPECT_LE(*heaviest - *lightest, block_cost(32, 32, false));
}

// rank_origin() names, for each stack and segment of a rank's plan, the one of the
// whole plan it came from: the same parameters, block positions and elements.
TEST(WorkSplit, RankOriginsNameWhereEachRankBlockCameFrom) {
  const auto plan = example_plan();
  const std::vector<blocking::GroupBlocking> blocking = {{32, false, 0}};
  for (int64_t ranks : {1, 2, 3, 7}) {
    const auto split = split_work(plan, ranks);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const auto part = plan_for_rank(plan, split, rank, blocking);
      const auto origin = rank_origin(plan, split, rank);
      ASSERT_EQ(origin.stacks.size(), part.gradient_stacks.size());
      for (size_t s = 0; s < part.gradient_stacks.size(); ++s) {
        const auto& whole = plan.gradient_stacks[origin.stacks[s]];
        ASSERT_EQ(static_cast<int64_t>(origin.blocks[s].size()), part.gradient_stacks[s].count());
        for (int64_t i = 0; i < part.gradient_stacks[s].count(); ++i) {
          EXPECT_EQ(blocking::flat_positions(part, part.gradient_stacks[s], i),
              blocking::flat_positions(plan, whole, origin.blocks[s][i]));
        }
      }
      ASSERT_EQ(origin.segments.size(), part.adamw_segments.size());
      for (size_t j = 0; j < part.adamw_segments.size(); ++j) {
        EXPECT_EQ(part.adamw_segments[j].offset, plan.adamw_segments[origin.segments[j]].offset);
        EXPECT_EQ(part.adamw_segments[j].params, plan.adamw_segments[origin.segments[j]].params);
      }
    }
  }
}

}  // namespace
}  // namespace dash::distributed
