#include "distributed/share_layout.h"

#include <c10/util/Exception.h>

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
  TORCH_CHECK(slot.offset >= run.offset && slot.offset + slot.numel <= run.offset + run.numel,
      "dash: parameter ", param, " is not in AdamW segment ", segment);
  return share.narrow(0, layout.segment_offsets.at(segment) + slot.offset - run.offset, slot.numel).view(shape);
}

}  // namespace dash::distributed
