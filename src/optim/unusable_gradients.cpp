#include "optim/unusable_gradients.h"

#include "optim/distributor.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <cmath>
#include <optional>
#include <string>

namespace dash::optim {
namespace {

// The parameters to name, as this process sees them: the first non-finite one, the
// first non-finite one whose group's policy is to raise, the first too large one.
struct Suspects {
  std::optional<size_t> non_finite;
  std::optional<size_t> raising;
  std::optional<size_t> too_large;
};

Suspects find_suspects(const std::vector<at::Tensor>& gradients, const std::vector<bool>& has_grad,
    const std::function<NonFiniteGradients(size_t)>& policy, double overflow_limit) {
  Suspects found;
  for (size_t i = 0; i < gradients.size() && !found.raising; ++i) {
    if (!has_grad[i]) continue;
    const auto& grad = gradients[i];
    if (!at::isfinite(grad).all().item<bool>()) {
      if (!found.non_finite) found.non_finite = i;
      if (policy(i) == NonFiniteGradients::Error) found.raising = i;
    } else if (!found.too_large && !(grad.to(at::kFloat).abs() <= overflow_limit).all().item<bool>()) {
      found.too_large = i;
    }
  }
  return found;
}

}  // namespace

SkipReason judge_unusable_gradients(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& gradients,
    const std::vector<bool>& has_grad, const std::function<NonFiniteGradients(size_t param)>& policy, double largest,
    double overflow_limit, Distributor& distributor) {
  const auto found = find_suspects(gradients, has_grad, policy, overflow_limit);
  // Whether some rank holds a non-finite gradient, and whether one of them is in a
  // group whose policy is to raise.
  auto seen = at::tensor({found.non_finite ? 1.0f : 0.0f, found.raising ? 1.0f : 0.0f}).to(params.front().device());
  distributor.take_maximum_over_ranks(seen);
  seen = seen.cpu();
  const bool any_non_finite = seen[0].item<float>() > 0.0f;
  const bool any_raising = seen[1].item<float>() > 0.0f;
  const auto named = any_non_finite ? (any_raising ? found.raising : found.non_finite) : found.too_large;
  const auto where = named ? "parameter " + std::to_string(*named) + " of shape " + c10::str(params[*named].sizes())
                           : std::string("another rank's gradients");
  if (!any_non_finite) {
    const double magnitude = std::isfinite(largest) || !found.too_large
                                 ? largest
                                 : gradients[*found.too_large].abs().max().to(at::kDouble).item<double>();
    TORCH_WARN("dash::Dash: skipping a step: a gradient entry of magnitude ", magnitude, " in ", where, " is above ",
        overflow_limit,
        ", beyond which the float32 statistics of its blocks can overflow; "
        "the state is unchanged (diagnostics().overflow_skipped_steps counts such steps)");
    return SkipReason::Overflow;
  }
  TORCH_CHECK(!any_raising, "dash::Dash: non-finite gradient (NaN or Inf) in ", where,
      "; set the option non_finite_gradients to \"skip-step\" (C++: NonFiniteGradients::SkipStep) to skip such "
      "steps");
  TORCH_WARN("dash::Dash: skipping a step: non-finite gradient in ", where);
  return SkipReason::NonFinite;
}

}  // namespace dash::optim
