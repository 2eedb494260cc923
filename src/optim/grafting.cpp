// The grafting types of spec §4 step 6. Adam, RMSprop and AdaGrad divide Ĝ by the
// square root of a second-moment statistic; SGD grafts to Ĝ itself; None applies
// the preconditioned update unscaled.

#include "optim/grafting.h"

#include "optim/block_update.h"

#include <ATen/ATen.h>

namespace dash::optim {
namespace {

// P_g = Ĝ / (√(A / c) + ε_g), with c the statistic's bias correction (1: none).
void divide_by_root_of_statistic(
    const at::Tensor& ghat, const at::Tensor& statistic, const at::Tensor& correction, double eps, at::Tensor& out) {
  if (correction.defined()) {
    at::div_out(out, statistic, correction);
    out.sqrt_();
  } else {
    at::sqrt_out(out, statistic);
  }
  out.add_(eps);
  at::div_out(out, ghat, out);
}

// A ← β_g A + (1 − β_g) G², bias-corrected.
class AdamGrafting final : public Grafting {
 public:
  bool keeps_statistic() const override { return true; }
  void direction(const at::Tensor& grad, const at::Tensor& ghat, MomentState& state, const StepHyper& hyper,
      at::Tensor& out) const override {
    state.graft_stat.mul_(hyper.beta_graft).addcmul_(grad, grad, 1.0 - hyper.beta_graft);
    divide_by_root_of_statistic(ghat, state.graft_stat,
        bias_correction(hyper.beta_graft, state.steps, hyper.bias_correction), hyper.eps_graft, out);
  }
};

// A ← β_g A + (1 − β_g) G², not bias-corrected.
class RMSpropGrafting final : public Grafting {
 public:
  bool keeps_statistic() const override { return true; }
  void direction(const at::Tensor& grad, const at::Tensor& ghat, MomentState& state, const StepHyper& hyper,
      at::Tensor& out) const override {
    state.graft_stat.mul_(hyper.beta_graft).addcmul_(grad, grad, 1.0 - hyper.beta_graft);
    divide_by_root_of_statistic(ghat, state.graft_stat, at::Tensor(), hyper.eps_graft, out);
  }
};

// A ← A + G².
class AdaGradGrafting final : public Grafting {
 public:
  bool keeps_statistic() const override { return true; }
  void direction(const at::Tensor& grad, const at::Tensor& ghat, MomentState& state, const StepHyper& hyper,
      at::Tensor& out) const override {
    state.graft_stat.addcmul_(grad, grad);
    divide_by_root_of_statistic(ghat, state.graft_stat, at::Tensor(), hyper.eps_graft, out);
  }
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
  static const AdamGrafting adam;
  static const RMSpropGrafting rmsprop;
  static const AdaGradGrafting adagrad;
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
