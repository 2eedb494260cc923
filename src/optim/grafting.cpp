// The grafting types of spec §4 step 6. Adam, RMSprop and AdaGrad divide Ĝ by the
// square root of a second-moment statistic; SGD grafts to Ĝ itself; None applies
// the preconditioned update unscaled.

#include "optim/grafting.h"

#include "kernels/fused_moments.h"
#include "optim/block_state.h"

#include <ATen/ATen.h>

namespace dash::optim {
namespace {

// P_g = Ĝ / (√(A / c) + ε_g) from a second-moment statistic A of the gradient:
// Adam A ← β_g A + (1 − β_g) G² with c its bias correction, RMSprop the same EMA
// with c = 1, AdaGrad A ← A + G² with c = 1.
class SecondMomentGrafting final : public Grafting {
 public:
  SecondMomentGrafting(bool exponential_average, bool bias_corrected)
      : exponential_average_(exponential_average), bias_corrected_(bias_corrected) {}

  bool keeps_statistic() const override { return true; }

  void direction(const at::Tensor& grad, const at::Tensor& ghat, MomentState& state, const StepHyper& hyper,
      at::Tensor& out) const override {
    auto& statistic = state.graft_stat;
    if (exponential_average_) {
      statistic.mul_(hyper.beta_graft).addcmul_(grad, grad, 1.0 - hyper.beta_graft);
    } else {
      statistic.addcmul_(grad, grad);
    }
    if (bias_corrected_) {
      at::div_out(
          out, statistic, bias_correction_of(state.stat_correction, hyper.beta_graft, state, hyper.bias_correction));
      out.sqrt_();
    } else {
      at::sqrt_out(out, statistic);
    }
    out.add_(hyper.eps_graft);
    at::div_out(out, ghat, out);
  }

  bool fused_step(const at::Tensor& grad, MomentState& state, const StepHyper& hyper, at::Tensor& ghat,
      at::Tensor& out) const override {
    // Step counts per element (AdamW segments) or a layout the kernels cannot take:
    // refused before any work. Corrections from (n, 1, 1) counts are (n, 1, 1) and contiguous.
    const bool per_block = state.steps.dim() == 3 && state.steps.size(1) == 1 && state.steps.size(2) == 1;
    if (!per_block || !kernels::fused_second_moment_supported(
                          grad, state.grad_ema, state.graft_stat, at::Tensor(), at::Tensor(), ghat, out)) {
      return false;
    }
    const auto ema_correction =
        bias_correction_of(state.grad_correction, hyper.beta_grad, state, hyper.bias_correction);
    const auto stat_correction =
        bias_corrected_ ? bias_correction_of(state.stat_correction, hyper.beta_graft, state, hyper.bias_correction)
                        : at::Tensor();
    kernels::SecondMomentCoefficients coefficients;
    coefficients.grad_decay = static_cast<float>(hyper.beta_grad);
    coefficients.grad_weight = static_cast<float>(1.0 - hyper.beta_grad);
    coefficients.stat_decay = exponential_average_ ? static_cast<float>(hyper.beta_graft) : 1.0f;
    coefficients.stat_weight = exponential_average_ ? static_cast<float>(1.0 - hyper.beta_graft) : 1.0f;
    coefficients.eps = static_cast<float>(hyper.eps_graft);
    kernels::fused_second_moment_step(
        grad, state.grad_ema, state.graft_stat, ema_correction, stat_correction, coefficients, ghat, out);
    return true;
  }

 private:
  bool exponential_average_;
  bool bias_corrected_;
};

// P_g = Ĝ (a copy: the caller may reuse Ĝ's buffer for the preconditioned update).
class SGDGrafting : public Grafting {
 public:
  bool keeps_statistic() const override { return false; }
  void direction(
      const at::Tensor&, const at::Tensor& ghat, MomentState&, const StepHyper&, at::Tensor& out) const override {
    out.copy_(ghat);
  }
};

// No rescaling; P_g = Ĝ is still the direction of steps before t_start.
class NoGrafting final : public SGDGrafting {
 public:
  bool rescales_update() const override { return false; }
};

}  // namespace

const Grafting& grafting_for(GraftingType type) {
  static const SecondMomentGrafting adam(/*exponential_average=*/true, /*bias_corrected=*/true);
  static const SecondMomentGrafting rmsprop(/*exponential_average=*/true, /*bias_corrected=*/false);
  static const SecondMomentGrafting adagrad(/*exponential_average=*/false, /*bias_corrected=*/false);
  static const SGDGrafting sgd;
  static const NoGrafting none;
  switch (type) {
    case GraftingType::Adam:
      return adam;
    case GraftingType::RMSprop:
      return rmsprop;
    case GraftingType::AdaGrad:
      return adagrad;
    case GraftingType::SGD:
      return sgd;
    case GraftingType::None:
      return none;
  }
  TORCH_CHECK(false, "dash::Dash: unknown grafting type ", static_cast<int>(type));
}

}  // namespace dash::optim
