#include "optim/adamw_segment.h"

#include "optim/dash_options.h"
#include "optim/moments.h"

#include <ATen/ATen.h>

namespace dash::optim {

AdamWSegmentState zero_adamw_segment(
    const blocking::AdamWSegment& segment, const DashOptions& options, const at::TensorOptions& to) {
  auto moments = zero_moments({1, 1, segment.numel}, false, adamw_hyper(options), to);
  Workspace work{at::empty_like(moments.grad_ema), at::empty_like(moments.grad_ema), at::Tensor(), at::Tensor()};
  return {std::move(moments), std::move(work)};
}

void step_adamw_segment(const blocking::AdamWSegment& segment, const std::vector<blocking::ParameterSlot>& slots,
    const std::vector<bool>& has_grad, const DashOptions& options, const at::Tensor& grad, AdamWSegmentState& state,
    at::Tensor update) {
  auto& moments = state.moments;
  bool all_active = true;
  for (auto i : segment.params) all_active = all_active && has_grad[i];
  // Parameters without a gradient keep their moments and t: t advances only where
  // active, and the moments are restored where not.
  at::Tensor ema_before;
  at::Tensor statistic_before;
  at::Tensor active;
  if (!all_active) {
    active = at::zeros({1, 1, segment.numel}, grad.options().dtype(at::kBool));
    for (auto i : segment.params) {
      if (has_grad[i]) active.narrow(2, slots[i].offset - segment.offset, slots[i].numel).fill_(true);
    }
    ema_before = moments.grad_ema.clone();
    statistic_before = moments.graft_stat.clone();
    moments.steps.add_(active);
  } else {
    moments.steps.add_(1);
  }
  const auto hyper = adamw_hyper(options);
  moments.grad_correction =
      bias_correction_into(state.grad_correction, hyper.beta_grad, moments.steps, hyper.bias_correction);
  moments.stat_correction =
      bias_correction_into(state.stat_correction, hyper.beta_graft, moments.steps, hyper.bias_correction);
  grafting_direction(grad, moments, hyper, state.work);
  moments.grad_correction = moments.stat_correction = at::Tensor();  // the buffers stay the segment's
  const auto& direction = state.work.graft;
  if (!all_active) {
    moments.grad_ema.copy_(at::where(active, moments.grad_ema, ema_before));
    moments.graft_stat.copy_(at::where(active, moments.graft_stat, statistic_before));
  }
  update.copy_(direction.view(-1)).mul_(options.lr());
}

}  // namespace dash::optim
