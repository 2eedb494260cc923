// The shares of a distributed step (pure bookkeeping): each rank's stacks and
// segments laid end to end, written and read back through views, and cut into
// rounds at block and parameter boundaries that cover every share exactly once.

#include "distributed/share_layout.h"
#include "distributed/work_split.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace dash::distributed {
namespace {

const std::vector<blocking::GroupBlocking> kBlocking = {{32, false, 0}};

// Full and edge blocks in stacks shared between parameters, a 1-D parameter, a
// scalar and an empty one in the AdamW segment.
blocking::StackPlan example_plan() {
  const std::vector<std::vector<int64_t>> shapes = {{70, 40}, {32, 32}, {48, 20}, {16}, {64, 32}, {}, {0}};
  return blocking::plan_stacks(shapes, std::vector<int64_t>(shapes.size(), 0), kBlocking);
}

std::vector<blocking::StackPlan> rank_plans(const blocking::StackPlan& plan, int64_t ranks) {
  const auto split = split_work(plan, ranks);
  std::vector<blocking::StackPlan> plans;
  for (int64_t rank = 0; rank < ranks; ++rank) plans.push_back(plan_for_rank(plan, split, rank, kBlocking));
  return plans;
}

TEST(ShareLayout, StacksAndSegmentsLieEndToEndAndReadBackThroughViews) {
  const auto plan = example_plan();
  const auto layout = share_layout(plan);
  int64_t expected = 0;
  for (const auto& stack : plan.gradient_stacks) expected += stack.count() * stack.rows * stack.cols;
  for (const auto& segment : plan.adamw_segments) expected += segment.numel;
  EXPECT_EQ(layout.numel, expected);
  EXPECT_EQ(layout.numel, plan.flat_numel);  // one process: the share is every element once

  // Writing each stack and parameter through its view fills the share exactly once.
  auto share = at::zeros({layout.numel}, at::kFloat);
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) stack_in_share(share, layout, plan, s).add_(1.0);
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    for (auto i : plan.adamw_segments[j].params) {
      const auto& slot = plan.parameters[i];
      parameter_in_share(share, layout, plan, j, i, {slot.numel}).add_(1.0);
    }
  }
  EXPECT_TRUE(at::equal(share, at::ones_like(share)));
}

// Every block and every parameter of a rank's share in exactly one round, whole,
// and each round within the limit unless one piece alone is larger.
TEST(ShareRounds, CoverEveryShareOnceAtPieceBoundaries) {
  const auto plan = example_plan();
  for (int64_t ranks : {1, 2, 3}) {
    const auto plans = rank_plans(plan, ranks);
    std::vector<ShareLayout> layouts;
    for (const auto& part : plans) layouts.push_back(share_layout(part));
    for (int64_t limit : {0, 1, 1000, 2000, 5000, 1 << 20}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, limit " + std::to_string(limit));
      const auto rounds = share_rounds(plans, layouts, limit);
      ASSERT_FALSE(rounds.ranges.empty());
      if (limit == 0 || limit >= (1 << 20)) EXPECT_EQ(rounds.ranges.size(), 1u);
      for (int64_t rank = 0; rank < ranks; ++rank) {
        std::set<std::tuple<int64_t, int64_t>> blocks;  // (stack, block)
        std::set<int64_t> params;
        int64_t covered = 0;
        for (const auto& round : rounds.ranges) {
          const auto [begin, end] = round[rank];
          EXPECT_EQ(begin, covered) << "ranges are consecutive";
          EXPECT_LE(end - begin, rounds.numel);
          covered = end;
          int64_t in_pieces = 0;
          const auto pieces = pieces_in(plans[rank], layouts[rank], begin, end);
          for (const auto& piece : pieces) {
            in_pieces += piece.numel;
            EXPECT_GE(piece.offset, begin);
            EXPECT_LE(piece.offset + piece.numel, end);
            for (int64_t b = piece.first_block; b < piece.first_block + piece.blocks; ++b) {
              EXPECT_TRUE(blocks.emplace(piece.stack, b).second) << "block in two rounds";
            }
            if (piece.param >= 0) EXPECT_TRUE(params.insert(piece.param).second) << "parameter in two rounds";
          }
          EXPECT_EQ(in_pieces, end - begin) << "a range cuts a piece";
          if (limit > 0 && end - begin > limit) EXPECT_EQ(pieces.size(), 1u) << "only a lone piece exceeds the limit";
        }
        EXPECT_EQ(covered, layouts[rank].numel);
        int64_t all_blocks = 0;
        for (const auto& stack : plans[rank].gradient_stacks) all_blocks += stack.count();
        EXPECT_EQ(static_cast<int64_t>(blocks.size()), all_blocks);
      }
    }
  }
}

}  // namespace
}  // namespace dash::distributed
