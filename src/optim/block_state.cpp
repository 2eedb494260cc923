#include "optim/block_state.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::optim {

Workspace Workspace::like(const at::Tensor& like) {
  return {at::empty_like(like), at::empty_like(like), at::empty_like(like), at::empty_like(like)};
}

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

}  // namespace dash::optim
