#include "distributed/share_layout.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::distributed {

ShareLayout share_layout(const blocking::StackPlan& plan) {
  ShareLayout layout;
  for (const auto& stack : plan.gradient_stacks) {
    layout.stack_offsets.push_back(layout.numel);
    layout.numel += stack.count() * stack.rows * stack.cols;
  }
  for (const auto& segment : plan.adamw_segments) {
    layout.segment_offsets.push_back(layout.numel);
    layout.numel += segment.numel;
  }
  return layout;
}

at::Tensor stack_in_share(
    const at::Tensor& share, const ShareLayout& layout, const blocking::StackPlan& plan, size_t stack) {
  const auto& blocks = plan.gradient_stacks.at(stack);
  return share.narrow(0, layout.stack_offsets.at(stack), blocks.count() * blocks.rows * blocks.cols)
      .view({blocks.count(), blocks.rows, blocks.cols});
}

at::Tensor parameter_in_share(const at::Tensor& share, const ShareLayout& layout, const blocking::StackPlan& plan,
    size_t segment, int64_t param, at::IntArrayRef shape) {
  const auto& slot = plan.parameters.at(static_cast<size_t>(param));
  const auto& run = plan.adamw_segments.at(segment);
  TORCH_CHECK(slot.offset >= run.offset && slot.offset + slot.numel <= run.offset + run.numel, "dash: parameter ",
      param, " is not in AdamW segment ", segment);
  return share.narrow(0, layout.segment_offsets.at(segment) + slot.offset - run.offset, slot.numel).view(shape);
}

std::vector<SharePiece> pieces_in(
    const blocking::StackPlan& plan, const ShareLayout& layout, int64_t begin, int64_t end) {
  std::vector<SharePiece> pieces;
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
    const auto& stack = plan.gradient_stacks[s];
    const int64_t block = stack.rows * stack.cols;
    const int64_t start = layout.stack_offsets[s];
    // The blocks that lie wholly in [begin, end) (below `start` the divisions round
    // towards zero, and the clamps take what is left).
    const int64_t first = std::clamp<int64_t>((begin - start + block - 1) / block, 0, stack.count());
    const int64_t last = std::clamp<int64_t>((end - start) / block, 0, stack.count());
    if (last > first) {
      pieces.push_back(
          {static_cast<int64_t>(s), first, last - first, -1, -1, start + first * block, (last - first) * block});
    }
  }
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    const auto& segment = plan.adamw_segments[j];
    for (auto i : segment.params) {
      const auto& slot = plan.parameters[i];
      const int64_t offset = layout.segment_offsets[j] + slot.offset - segment.offset;
      if (slot.numel > 0 && offset >= begin && offset + slot.numel <= end) {
        pieces.push_back({-1, 0, 0, static_cast<int64_t>(j), i, offset, slot.numel});
      }
    }
  }
  return pieces;
}

ShareRounds share_rounds(
    const std::vector<blocking::StackPlan>& plans, const std::vector<ShareLayout>& layouts, int64_t round_numel) {
  TORCH_CHECK(
      plans.size() == layouts.size(), "dash: share_rounds: ", plans.size(), " plans, ", layouts.size(), " layouts");
  ShareRounds rounds;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> per_rank(plans.size());
  for (size_t r = 0; r < plans.size(); ++r) {
    auto& ranges = per_rank[r];
    if (round_numel == 0) {
      ranges.emplace_back(0, layouts[r].numel);
      continue;
    }
    // Greedily: each piece (one block, one parameter) joins the open range while it fits.
    std::pair<int64_t, int64_t> open{0, 0};
    auto take = [&](int64_t numel) {
      if (open.second > open.first && open.second + numel - open.first > round_numel) {
        ranges.push_back(open);
        open = {open.second, open.second};
      }
      open.second += numel;
    };
    for (const auto& stack : plans[r].gradient_stacks) {
      for (int64_t b = 0; b < stack.count(); ++b) take(stack.rows * stack.cols);
    }
    for (const auto& piece : pieces_in(plans[r], layouts[r], 0, layouts[r].numel)) {
      if (piece.stack < 0) take(piece.numel);
    }
    if (open.second > open.first || ranges.empty()) ranges.push_back(open);
  }
  size_t count = 0;
  for (const auto& ranges : per_rank) count = std::max(count, ranges.size());
  rounds.ranges.assign(count, std::vector<std::pair<int64_t, int64_t>>(plans.size()));
  for (size_t r = 0; r < plans.size(); ++r) {
    const int64_t end = layouts[r].numel;
    for (size_t k = 0; k < count; ++k) {
      rounds.ranges[k][r] = k < per_rank[r].size() ? per_rank[r][k] : std::pair<int64_t, int64_t>{end, end};
      rounds.numel = std::max(rounds.numel, rounds.ranges[k][r].second - rounds.ranges[k][r].first);
    }
  }
  return rounds;
}

}  // namespace dash::distributed
