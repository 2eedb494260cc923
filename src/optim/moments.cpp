#include "optim/moments.h"

#include "optim/grafting.h"
#include "optim/state_precision.h"

#include <ATen/ATen.h>

namespace dash::optim {

MomentState zero_moments(const std::vector<int64_t>& shape, bool steps_per_block, const StepHyper& hyper,
    const at::TensorOptions& to, at::ScalarType dtype) {
  MomentState state;
  const auto stored = to.dtype(dtype);
  state.grad_ema = at::zeros(shape, stored);
  if (grafting_for(hyper.grafting).keeps_statistic()) state.graft_stat = at::zeros(shape, stored);
  if (hyper.momentum > 0.0) state.momentum = at::zeros(shape, stored);
  state.steps = steps_per_block ? at::zeros({shape[0], 1, 1}, to) : at::zeros(shape, to);
  return state;
}

MomentState moments_of(const MomentState& full, const Rows& rows, kernels::Scratch* scratch) {
  auto part = [&](const at::Tensor& t) { return t.defined() ? rows.take(t, scratch) : t; };
  return {part(full.grad_ema), part(full.graft_stat), part(full.momentum), part(full.steps)};
}

void put_moments(MomentState& full, const MomentState& part, const Rows& rows) {
  auto back = [&](at::Tensor& t, const at::Tensor& p) {
    if (t.defined()) rows.put(t, p);
  };
  back(full.grad_ema, part.grad_ema);
  back(full.graft_stat, part.graft_stat);
  back(full.momentum, part.momentum);
  back(full.steps, part.steps);
}

MomentState widened_moments(const MomentState& stored, kernels::Scratch& scratch) {
  return {widened(stored.grad_ema, scratch), widened(stored.graft_stat, scratch), widened(stored.momentum, scratch),
      stored.steps};
}

void store_rounded_moments(const MomentState& stored, const MomentState& computed) {
  store_rounded(stored.grad_ema, computed.grad_ema);
  store_rounded(stored.graft_stat, computed.graft_stat);
  store_rounded(stored.momentum, computed.momentum);
}

}  // namespace dash::optim
