#pragma once

// Grafting (spec §4 step 6): the direction P_g whose per-block Frobenius norm the
// Shampoo update is given. One Grafting per GraftingType (the second-moment types
// share a class), the way Distributed Shampoo gives each grafting type its own
// config and preconditioner; the step (block_update.h) only asks the interface. To
// add a type: a GraftingType value and its name (<dash/optimizer_options.h>,
// option_names.cpp), an instance (or a class) in grafting.cpp, and its line in
// grafting_for().

#include <dash/optimizer_options.h>

#include <ATen/core/Tensor.h>

namespace dash::optim {

struct MomentState;  // optim/block_state.h
struct StepHyper;

class Grafting {
 public:
  virtual ~Grafting() = default;

  /// Whether it keeps a per-element second-moment statistic A: part of the shape
  /// of a block's state.
  virtual bool keeps_statistic() const = 0;

  /// Whether the preconditioned update L̄ Ĝ R̄ is rescaled per block to ‖P_g‖_F
  /// (false: it is applied as it is).
  virtual bool rescales_update() const { return true; }

  /// Updates A in `state` from the gradient and writes P_g into `out` (shaped like
  /// `ghat`, the bias-corrected gradient EMA Ĝ; `out` may not alias it).
  virtual void direction(const at::Tensor& grad, const at::Tensor& ghat, MomentState& state, const StepHyper& hyper,
      at::Tensor& out) const = 0;

  /// Steps 5–6 in one fused pass (fused_moments.h) where the tensors allow: updates
  /// M and A, writes Ĝ into `ghat` and P_g into `out`, and returns true; otherwise
  /// changes nothing and returns false (the caller takes the unfused path).
  virtual bool fused_step(const at::Tensor& /*grad*/, MomentState& /*state*/, const StepHyper& /*hyper*/,
      at::Tensor& /*ghat*/, at::Tensor& /*out*/) const {
    return false;
  }
};

/// The grafting of a type: a shared, stateless instance.
const Grafting& grafting_for(GraftingType type);

}  // namespace dash::optim
