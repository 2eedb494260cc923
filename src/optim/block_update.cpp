#include "optim/block_update.h"

#include "kernels/core_ranges.h"
#include "kernels/fused_moments.h"
#include "optim/grafting.h"

#include <ATen/ATen.h>

namespace dash::optim {
namespace {

// ‖t_i‖_F of each matrix into `norms`, (N, 1, 1) (made where undefined): ATen's norm,
// over the cores where its pool has one thread (kernels::for_each_pass_range; the
// same numbers, each matrix's sum its own).
at::Tensor& frobenius_norms_into(at::Tensor& norms, const at::Tensor& t) {
  if (!norms.defined()) norms = at::empty({t.size(0), 1, 1}, t.options());
  TORCH_CHECK(norms.sizes().equals({t.size(0), 1, 1}) && norms.scalar_type() == t.scalar_type(),
      "dash: frobenius_norms_into: expected a (", t.size(0), ", 1, 1) ", t.scalar_type(), " buffer, got ",
      norms.sizes(), " ", norms.scalar_type());
  (void)norms.data_ptr();  // on this thread (for_each_pass_range)
  kernels::for_each_pass_range(t, static_cast<double>(t.numel() * t.element_size()), [&](int64_t first, int64_t last) {
    auto out = norms.slice(0, first, last);
    at::linalg_vector_norm_out(out, t.slice(0, first, last), 2, {1, 2}, /*keepdim=*/true);
  });
  return norms;
}

// t_i ← t_i · factor_i for (N, 1, 1) factors, in place, over the cores as above.
at::Tensor& scale_matrices_(at::Tensor& t, const at::Tensor& factors) {
  (void)t.data_ptr();  // on this thread (for_each_pass_range)
  kernels::for_each_pass_range(t, 2.0 * static_cast<double>(t.numel() * t.element_size()),
      [&](int64_t first, int64_t last) { t.slice(0, first, last).mul_(factors.slice(0, first, last)); });
  return t;
}

}  // namespace

void grafting_direction(const at::Tensor& grad, MomentState& state, const StepHyper& hyper, Workspace& work) {
  const auto& grafting = grafting_for(hyper.grafting);
  if (grafting.fused_step(grad, state, hyper, work.ghat, work.graft)) return;
  if (grad.is_cuda() && grafting.keeps_statistic() && !kernels::cuda_kernels_built()) {
    TORCH_WARN_ONCE(
        "dash::Dash: this build has no CUDA kernels (configured without a CUDA compiler, or with "
        "DASH_CUDA_KERNELS=OFF): the grafting statistics take nine element-wise kernels (21 passes over memory) "
        "instead of one (7)");
  }
  state.grad_ema.mul_(hyper.beta_grad).add_(grad, 1.0 - hyper.beta_grad);
  at::div_out(work.ghat, state.grad_ema,
      bias_correction_of(state.grad_correction, hyper.beta_grad, state, hyper.bias_correction));
  grafting.direction(grad, work.ghat, state, hyper, work.graft);
}

at::Tensor grafted(Workspace& work, at::Tensor u, GraftingType grafting, double scale) {
  if (!grafting_for(grafting).rescales_update()) return scale == 1.0 ? u : u.mul_(scale);
  // Plain float32 norms: a block whose ‖U‖ overflows (entries ≳ 1e19) gets ratio 0,
  // i.e. no step — as AdamW, whose G² overflows there too. The scale rides on the
  // (n, 1, 1) ratio: no pass of its own over U.
  frobenius_norms_into(work.graft_norms, work.graft);
  auto& ratio = work.graft_norms.mul_(scale).div_(frobenius_norms_into(work.direction_norms, u).add_(1e-16));
  return scale_matrices_(u, ratio);
}

at::Tensor apply_momentum(const at::Tensor& direction, MomentState& state, const StepHyper& hyper) {
  if (hyper.momentum == 0.0) return direction;
  state.momentum.mul_(hyper.momentum).add_(direction);
  return hyper.nesterov ? direction.add_(state.momentum, hyper.momentum) : direction.copy_(state.momentum);
}

}  // namespace dash::optim
