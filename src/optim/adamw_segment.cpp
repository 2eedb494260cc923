#include "optim/adamw_segment.h"

#include "optim/block_update.h"
#include "optim/dash_options.h"
#include "optim/moments.h"
#include "optim/state_fields.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <array>
#include <vector>

namespace dash::optim {

AdamWSegmentState zero_adamw_segment(
    const blocking::AdamWSegment& segment, const DashOptions& options, const at::TensorOptions& to) {
  auto moments = zero_moments({1, 1, segment.numel}, false, adamw_hyper(options), to);
  Workspace work{at::empty_like(moments.grad_ema), at::empty_like(moments.grad_ema), at::Tensor(), at::Tensor()};
  return {std::move(moments), std::move(work)};
}

namespace {

/// A stretch of a segment's elements, `offset` from the segment's first.
struct SegmentRange {
  int64_t offset = 0;
  int64_t length = 0;
};

/// The elements of `segment` whose parameters have no gradient, neighbours merged.
std::vector<SegmentRange> ranges_without_gradient(const blocking::AdamWSegment& segment,
    const std::vector<blocking::ParameterSlot>& slots, const std::vector<bool>& has_grad) {
  std::vector<SegmentRange> ranges;
  for (auto i : segment.params) {
    if (has_grad[i] || slots[i].numel == 0) continue;
    const auto offset = slots[i].offset - segment.offset;
    if (!ranges.empty() && ranges.back().offset + ranges.back().length == offset) {
      ranges.back().length += slots[i].numel;
    } else {
      ranges.push_back({offset, slots[i].numel});
    }
  }
  return ranges;
}

enum class Exchange { Keep, PutBack };

/// The `ranges` of every moment, one after another, into `kept` (grown where they do
/// not fit), or back from it.
void exchange_ranges(MomentState& moments, const std::vector<SegmentRange>& ranges, int64_t numel,
    std::array<at::Tensor, 4>& kept, Exchange direction) {
  for (size_t m = 0; m < moment_fields.size(); ++m) {
    const auto& moment = moments.*moment_fields[m].tensor;
    if (!moment.defined()) continue;
    auto& copies = kept[m];
    if (!copies.defined() || copies.numel() < numel || copies.dtype() != moment.dtype() ||
        copies.device() != moment.device()) {
      TORCH_INTERNAL_ASSERT(direction == Exchange::Keep, "dash: a segment's kept moments went missing within a step");
      copies = at::empty({numel}, moment.options());
    }
    int64_t position = 0;
    for (const auto& range : ranges) {
      auto elements = moment.view(-1).narrow(0, range.offset, range.length);
      auto copy = copies.narrow(0, position, range.length);
      if (direction == Exchange::Keep) {
        copy.copy_(elements);
      } else {
        elements.copy_(copy);
      }
      position += range.length;
    }
  }
}

}  // namespace

void step_adamw_segment(const blocking::AdamWSegment& segment, const std::vector<blocking::ParameterSlot>& slots,
    const std::vector<bool>& has_grad, const DashOptions& options, const at::Tensor& grad, AdamWSegmentState& state,
    at::Tensor update) {
  auto& moments = state.moments;
  // Parameters without a gradient keep their moments and t: the whole segment steps
  // (its launches do not depend on which parameters have gradients), then their
  // elements are put back from copies, bitwise, in buffers kept across steps.
  const auto idle = ranges_without_gradient(segment, slots, has_grad);
  int64_t idle_numel = 0;
  for (const auto& range : idle) idle_numel += range.length;
  if (idle_numel > 0) exchange_ranges(moments, idle, idle_numel, state.kept_without_gradient, Exchange::Keep);
  moments.steps.add_(1);
  const auto hyper = adamw_hyper(options);
  moments.grad_correction =
      bias_correction_into(state.grad_correction, hyper.beta_grad, moments.steps, hyper.bias_correction);
  moments.stat_correction =
      bias_correction_into(state.stat_correction, hyper.beta_graft, moments.steps, hyper.bias_correction);
  grafting_direction(grad, moments, hyper, state.work);
  moments.grad_correction = moments.stat_correction = at::Tensor();  // the buffers stay the segment's
  if (idle_numel > 0) exchange_ranges(moments, idle, idle_numel, state.kept_without_gradient, Exchange::PutBack);
  update.copy_(state.work.graft.view(-1)).mul_(options.lr());
}

}  // namespace dash::optim
