#include "blocking/stack_plan.h"

#include <c10/util/Exception.h>

#include <map>
#include <tuple>

namespace dash::blocking {
namespace {

// Flat order: per group, preconditioned parameters first, then the AdamW ones,
// so that each group's AdamW parameters are one contiguous segment.
void place_parameters(StackPlan& plan, const std::vector<std::vector<int64_t>>& shapes,
    const std::vector<int64_t>& groups, const std::vector<GroupBlocking>& blocking) {
  plan.parameters.resize(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    TORCH_CHECK(groups[i] >= 0 && groups[i] < static_cast<int64_t>(blocking.size()), "dash: parameter ", i,
        " refers to group ", groups[i], " of ", blocking.size());
    auto& slot = plan.parameters[i];
    slot.group = groups[i];
    slot.view = matrix_view(shapes[i]);
    slot.numel = 1;
    for (auto size : shapes[i]) slot.numel *= size;
    slot.preconditioned =
        slot.numel > 0 && (slot.view.kind == ParameterKind::Matrix ||
                              (slot.view.kind == ParameterKind::Vector && blocking[slot.group].shampoo_1d));
  }
  for (int64_t group = 0; group < static_cast<int64_t>(blocking.size()); ++group) {
    for (bool preconditioned : {true, false}) {
      AdamWSegment segment{group, plan.flat_numel, 0, {}};
      for (size_t i = 0; i < shapes.size(); ++i) {
        auto& slot = plan.parameters[i];
        if (slot.group != group || slot.preconditioned != preconditioned) continue;
        slot.offset = plan.flat_numel;
        plan.flat_numel += slot.numel;
        if (!preconditioned) {
          segment.numel += slot.numel;
          segment.params.push_back(static_cast<int64_t>(i));
        }
      }
      if (!preconditioned && !segment.params.empty()) plan.adamw_segments.push_back(std::move(segment));
    }
  }
}

void stack_blocks(StackPlan& plan, const std::vector<GroupBlocking>& blocking) {
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, size_t> stack_of;  // (group, rows, cols, one-sided)
  for (size_t i = 0; i < plan.parameters.size(); ++i) {
    const auto& slot = plan.parameters[i];
    if (!slot.preconditioned) continue;
    const bool one_sided = slot.view.kind == ParameterKind::Vector;
    for (const auto& block : partition(slot.view.rows, slot.view.cols, blocking[slot.group].block_size)) {
      auto key = std::make_tuple(slot.group, block.rows, block.cols, one_sided);
      auto found = stack_of.find(key);
      if (found == stack_of.end()) {
        found = stack_of.emplace(key, plan.gradient_stacks.size()).first;
        GradientStack stack;
        stack.group = slot.group;
        stack.rows = block.rows;
        stack.cols = block.cols;
        stack.one_sided = one_sided;
        plan.gradient_stacks.push_back(std::move(stack));
      }
      auto& stack = plan.gradient_stacks[found->second];
      stack.block_params.push_back(static_cast<int64_t>(i));
      stack.blocks.push_back(block);
    }
  }
  for (auto& stack : plan.gradient_stacks) stack.regions = merge_into_regions(stack.block_params, stack.blocks);
}

void stack_factors(StackPlan& plan, const std::vector<GroupBlocking>& blocking) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> stack_of;  // (group, size, root)
  auto reserve = [&](int64_t group, int64_t size, int64_t root, int64_t count, int64_t& stack, int64_t& offset) {
    auto key = std::make_tuple(group, size, root);
    auto found = stack_of.find(key);
    if (found == stack_of.end()) {
      found = stack_of.emplace(key, plan.factor_stacks.size()).first;
      plan.factor_stacks.push_back({group, size, root, 0});
    }
    stack = static_cast<int64_t>(found->second);
    offset = plan.factor_stacks[found->second].count;
    plan.factor_stacks[found->second].count += count;
  };
  for (auto& stack : plan.gradient_stacks) {
    const auto& group = blocking[stack.group];
    const int64_t root = group.root_override > 0 ? group.root_override : (stack.one_sided ? 2 : 4);
    reserve(stack.group, stack.rows, root, stack.count(), stack.left_stack, stack.left_offset);
    if (!stack.one_sided) {
      reserve(stack.group, stack.cols, root, stack.count(), stack.right_stack, stack.right_offset);
    }
  }
}

}  // namespace

StackPlan plan_stacks(const std::vector<std::vector<int64_t>>& shapes, const std::vector<int64_t>& groups,
    const std::vector<GroupBlocking>& blocking) {
  TORCH_CHECK(shapes.size() == groups.size(), "dash: ", shapes.size(), " shapes but ", groups.size(), " groups");
  StackPlan plan;
  place_parameters(plan, shapes, groups, blocking);
  stack_blocks(plan, blocking);
  stack_factors(plan, blocking);
  return plan;
}

std::vector<int64_t> flat_positions(const StackPlan& plan, const GradientStack& stack, int64_t block) {
  TORCH_CHECK(block >= 0 && block < stack.count(), "dash: block ", block, " of a stack of ", stack.count());
  const auto& slot = plan.parameters[stack.block_params[block]];
  const auto& geometry = stack.blocks[block];
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(geometry.rows * geometry.cols));
  for (int64_t r = 0; r < geometry.rows; ++r) {
    for (int64_t c = 0; c < geometry.cols; ++c) {
      positions.push_back(slot.offset + (geometry.row + r) * slot.view.cols + geometry.col + c);
    }
  }
  return positions;
}

StackPlan restrict_plan(const StackPlan& plan, const std::vector<std::vector<bool>>& keep_blocks,
    const std::vector<bool>& keep_segments, const std::vector<GroupBlocking>& blocking) {
  TORCH_CHECK(keep_blocks.size() == plan.gradient_stacks.size() && keep_segments.size() == plan.adamw_segments.size(),
      "dash: restrict_plan needs one flag per block and per segment");
  StackPlan part;
  part.parameters = plan.parameters;
  part.flat_numel = plan.flat_numel;
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
    const auto& stack = plan.gradient_stacks[s];
    TORCH_CHECK(static_cast<int64_t>(keep_blocks[s].size()) == stack.count(), "dash: restrict_plan: stack ", s, " has ",
        stack.count(), " blocks, got ", keep_blocks[s].size(), " flags");
    GradientStack kept;
    kept.group = stack.group;
    kept.rows = stack.rows;
    kept.cols = stack.cols;
    kept.one_sided = stack.one_sided;
    for (int64_t b = 0; b < stack.count(); ++b) {
      if (!keep_blocks[s][b]) continue;
      kept.block_params.push_back(stack.block_params[b]);
      kept.blocks.push_back(stack.blocks[b]);
    }
    kept.regions = merge_into_regions(kept.block_params, kept.blocks);
    if (kept.count() > 0) part.gradient_stacks.push_back(std::move(kept));
  }
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    if (keep_segments[j]) part.adamw_segments.push_back(plan.adamw_segments[j]);
  }
  stack_factors(part, blocking);
  return part;
}

std::vector<int64_t> blocks_per_parameter(const StackPlan& plan) {
  std::vector<int64_t> counts(plan.parameters.size(), 0);
  for (const auto& stack : plan.gradient_stacks) {
    for (const auto param : stack.block_params) ++counts.at(static_cast<size_t>(param));
  }
  return counts;
}

std::vector<std::vector<int64_t>> parameter_block_numbers(const StackPlan& plan) {
  std::vector<int64_t> next(plan.parameters.size(), 0);
  std::vector<std::vector<int64_t>> numbers;
  for (const auto& stack : plan.gradient_stacks) {
    auto& stack_numbers = numbers.emplace_back();
    for (const auto param : stack.block_params) stack_numbers.push_back(next.at(static_cast<size_t>(param))++);
  }
  return numbers;
}

}  // namespace dash::blocking
