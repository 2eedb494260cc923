// The grafting types of spec §4 step 6. Adam, RMSprop and AdaGrad divide Ĝ by the
// square root of a second-moment statistic; SGD grafts to Ĝ itself; None applies
// the preconditioned update unscaled.

#include "optim/grafting.h"

#include "optim/block_update.h"

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
      at::div_out(out, statistic, bias_correction(hyper.beta_graft, state.steps, hyper.bias_correction));
      out.sqrt_();
    } else {
      at::sqrt_out(out, statistic);
    }
    out.add_(hyper.eps_graft);
    at::div_out(out, ghat, out);
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
