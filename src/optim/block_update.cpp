#include "optim/block_update.h"

#include <ATen/ATen.h>

namespace dash::optim {
namespace {

// ‖X‖_F per block, (n, 1, 1), computed on X / max|X| so that the squares of large
// entries (gradients up to 1e20) do not overflow float32.
at::Tensor block_norm(const at::Tensor& x) {
  auto magnitude = x.abs().amax({1, 2}, /*keepdim=*/true);
  auto unit = x / magnitude.clamp_min(std::numeric_limits<float>::min());
  return at::linalg_vector_norm(unit, 2, {1, 2}, /*keepdim=*/true) * magnitude;
}

// 1 − β^t per block; 1 when bias correction is off.
at::Tensor bias_correction(double beta, const at::Tensor& steps, bool enabled) {
  if (!enabled) return at::ones_like(steps);
  return 1.0 - at::pow(beta, steps);
}

}  // namespace

void accumulate_factor(at::Tensor& factor, const at::Tensor& grad, bool left, double beta) {
  const double weight = beta < 1.0 ? 1.0 - beta : 1.0;
  auto transposed = grad.transpose(1, 2);
  if (left) {
    factor.baddbmm_(grad, transposed, beta, weight);
  } else {
    factor.baddbmm_(transposed, grad, beta, weight);
  }
}

std::pair<at::Tensor, at::Tensor> grafting_direction(
    const at::Tensor& grad, MomentState& state, const StepHyper& hyper) {
  state.grad_ema.mul_(hyper.beta_grad).add_(grad, 1.0 - hyper.beta_grad);
  auto ghat = state.grad_ema / bias_correction(hyper.beta_grad, state.steps, hyper.bias_correction);
  switch (hyper.grafting) {
    case GraftingType::Adam: {
      state.graft_stat.mul_(hyper.beta_graft).addcmul_(grad, grad, 1.0 - hyper.beta_graft);
      auto second = state.graft_stat / bias_correction(hyper.beta_graft, state.steps, hyper.bias_correction);
      return {ghat, ghat / (second.sqrt() + hyper.eps_graft)};
    }
    case GraftingType::RMSprop:
      state.graft_stat.mul_(hyper.beta_graft).addcmul_(grad, grad, 1.0 - hyper.beta_graft);
      return {ghat, ghat / (state.graft_stat.sqrt() + hyper.eps_graft)};
    case GraftingType::AdaGrad:
      state.graft_stat.addcmul_(grad, grad);
      return {ghat, ghat / (state.graft_stat.sqrt() + hyper.eps_graft)};
    case GraftingType::SGD:
    case GraftingType::None:
      return {ghat, ghat};
  }
  return {ghat, ghat};
}

at::Tensor preconditioned_direction(const at::Tensor& ghat, const at::Tensor& graft, const at::Tensor& left_root,
    const at::Tensor& right_root, GraftingType grafting) {
  auto u = at::bmm(left_root, ghat);
  if (right_root.defined()) u = at::bmm(u, right_root);
  if (grafting == GraftingType::None) return u;
  return u * (block_norm(graft) / (block_norm(u) + 1e-16));
}

at::Tensor apply_momentum(const at::Tensor& direction, MomentState& state, const StepHyper& hyper) {
  if (hyper.momentum == 0.0) return direction;
  state.momentum.mul_(hyper.momentum).add_(direction);
  return hyper.nesterov ? direction + state.momentum * hyper.momentum : state.momentum.clone();
}

}  // namespace dash::optim
