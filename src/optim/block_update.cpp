#include "optim/block_update.h"

#include "kernels/fused_moments.h"
#include "optim/grafting.h"

#include "kernels/stack_blas.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>

#include <cmath>

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

at::Tensor& bias_correction_into(at::Tensor& out, double beta, const at::Tensor& steps, bool enabled) {
  if (!out.defined() || !out.sizes().equals(steps.sizes()) || out.device() != steps.device()) {
    out = at::empty_like(steps, at::MemoryFormat::Contiguous);
  }
  if (!enabled || beta == 0.0) return out.fill_(1.0);
  // 1 − β^t = −expm1(t log β), with log β taken in double: the steps are float32, in
  // which a β within 2⁻²⁵ of 1 is 1 and 1 − β^t would be 0 (an infinite step).
  return out.copy_(steps).mul_(std::log(beta)).expm1_().neg_();
}

at::Tensor bias_correction_of(const at::Tensor& given, double beta, const MomentState& state, bool enabled) {
  if (given.defined()) return given;
  at::Tensor fresh;
  return bias_correction_into(fresh, beta, state.steps, enabled);
}

void accumulate_factor(at::Tensor& factor, const at::Tensor& grad, bool left, double beta) {
  const double weight = beta < 1.0 ? 1.0 - beta : 1.0;
  // A factor is symmetric: where a CPU BLAS can form one triangle, it does half
  // the multiply-adds (docs/experiments/2026-12-03-step-floor.md, "Factor updates with syrk").
  if (kernels::stack_syrk_supported(factor, grad)) {
    kernels::stack_syrk(factor, grad, /*transpose_a=*/!left, weight, beta);
    return;
  }
  auto transposed = grad.transpose(1, 2);
  if (left) {
    factor.baddbmm_(grad, transposed, beta, weight);
  } else {
    factor.baddbmm_(transposed, grad, beta, weight);
  }
}

Workspace Workspace::like(const at::Tensor& like) {
  return {at::empty_like(like), at::empty_like(like), at::empty_like(like), at::empty_like(like)};
}

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

at::Tensor preconditioned_direction(
    Workspace& work, const at::Tensor& left_root, const at::Tensor& right_root, GraftingType grafting, double scale) {
  // Plain float32 norms: a block whose ‖U‖ overflows (entries ≳ 1e19) gets ratio 0,
  // i.e. no step — as AdamW, whose G² overflows there too.
  const bool rescale = grafting_for(grafting).rescales_update();
  if (rescale) frobenius_norms_into(work.graft_norms, work.graft);
  at::Tensor u;
  if (left_root.scalar_type() == work.ghat.scalar_type()) {
    kernels::stack_bmm_out(work.product, left_root, work.ghat);
    u = right_root.defined() ? kernels::stack_bmm_out(work.direction, work.product, right_root) : work.product;
  } else {
    TORCH_CHECK(work.ghat_operand.defined() && work.ghat_operand.scalar_type() == left_root.scalar_type() &&
                    work.product_operand.defined() && work.product_operand.scalar_type() == left_root.scalar_type(),
        "dash: preconditioned_direction: roots in ", left_root.scalar_type(), " need operand buffers of that dtype");
    // Ĝ is dead once rounded, so U (float32) goes into its buffer, work.direction.
    work.ghat_operand.copy_(work.ghat);
    kernels::stack_bmm_out(work.product_operand, left_root, work.ghat_operand);
    const auto& rounded = right_root.defined()
                              ? kernels::stack_bmm_out(work.ghat_operand, work.product_operand, right_root)
                              : work.product_operand;
    u = work.direction.copy_(rounded);
  }
  if (!rescale) return scale == 1.0 ? u : u.mul_(scale);
  // The scale rides on the (n, 1, 1) ratio: no pass of its own over U.
  auto& ratio = work.graft_norms.mul_(scale).div_(frobenius_norms_into(work.direction_norms, u).add_(1e-16));
  return scale_matrices_(u, ratio);
}

at::Tensor apply_momentum(const at::Tensor& direction, MomentState& state, const StepHyper& hyper) {
  if (hyper.momentum == 0.0) return direction;
  state.momentum.mul_(hyper.momentum).add_(direction);
  return hyper.nesterov ? direction.add_(state.momentum, hyper.momentum) : direction.copy_(state.momentum);
}

}  // namespace dash::optim
