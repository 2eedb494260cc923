#include "distributed/work_split.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

namespace dash::distributed {

double block_cost(int64_t rows, int64_t cols, bool one_sided) {
  const auto r = static_cast<double>(rows), c = static_cast<double>(cols);
  if (one_sided) return r * r * r + r * r * c;
  return r * r * r + c * c * c + r * c * (r + c);
}

double segment_cost(int64_t numel) { return static_cast<double>(numel); }

std::vector<int64_t> longest_processing_time_first(const std::vector<double>& costs, int64_t ranks) {
  TORCH_CHECK(ranks >= 1, "dash: the work split needs at least one rank, got ", ranks);
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<double> load(static_cast<size_t>(ranks), 0.0);
  std::vector<int64_t> owner(costs.size(), 0);
  for (const auto item : order) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();  // first minimum
    owner[item] = lightest;
    load[static_cast<size_t>(lightest)] += costs[item];
  }
  return owner;
}

WorkSplit split_work(const blocking::StackPlan& plan, int64_t world_size) {
  std::vector<double> costs;
  for (const auto& stack : plan.gradient_stacks) {
    costs.insert(costs.end(), static_cast<size_t>(stack.count()), block_cost(stack.rows, stack.cols, stack.one_sided));
  }
  for (const auto& segment : plan.adamw_segments) costs.push_back(segment_cost(segment.numel));
  const auto owner = longest_processing_time_first(costs, world_size);

  WorkSplit split;
  split.load.assign(static_cast<size_t>(world_size), 0.0);
  size_t item = 0;
  for (const auto& stack : plan.gradient_stacks) {
    auto& owners = split.block_owner.emplace_back();
    for (int64_t b = 0; b < stack.count(); ++b, ++item) {
      owners.push_back(owner[item]);
      split.load[static_cast<size_t>(owner[item])] += costs[item];
    }
  }
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j, ++item) {
    split.segment_owner.push_back(owner[item]);
    split.load[static_cast<size_t>(owner[item])] += costs[item];
  }
  return split;
}

blocking::StackPlan plan_for_rank(const blocking::StackPlan& plan, const WorkSplit& split, int64_t rank,
    const std::vector<blocking::GroupBlocking>& blocking) {
  std::vector<std::vector<bool>> keep_blocks;
  for (const auto& owners : split.block_owner) {
    auto& keep = keep_blocks.emplace_back();
    for (const auto owner : owners) keep.push_back(owner == rank);
  }
  std::vector<bool> keep_segments;
  for (const auto owner : split.segment_owner) keep_segments.push_back(owner == rank);
  return blocking::restrict_plan(plan, keep_blocks, keep_segments, blocking);
}

RankOrigin rank_origin(const blocking::StackPlan& plan, const WorkSplit& split, int64_t rank) {
  // As restrict_plan() keeps them: stacks in order, those left empty dropped, blocks in order.
  RankOrigin origin;
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
    std::vector<int64_t> blocks;
    for (int64_t b = 0; b < plan.gradient_stacks[s].count(); ++b) {
      if (split.block_owner[s][b] == rank) blocks.push_back(b);
    }
    if (blocks.empty()) continue;
    origin.stacks.push_back(static_cast<int64_t>(s));
    origin.blocks.push_back(std::move(blocks));
  }
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    if (split.segment_owner[j] == rank) origin.segments.push_back(static_cast<int64_t>(j));
  }
  return origin;
}

}  // namespace dash::distributed
