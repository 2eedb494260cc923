#include "optim/root_failure_limit.h"

#include "optim/dash_options.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

void root_failure_excess_into(at::Tensor out, at::Tensor worst, const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  TORCH_CHECK(worst.dim() == 1 && worst.size(0) == static_cast<int64_t>(states.size()) + 1,
      "dash: root_failure_excess_into needs a slot per factor stack and one more, got ", worst.sizes());
  int64_t limited = 0;
  for (size_t k = 0; k < states.size(); ++k) {
    const auto limit = options_of(groups[stacks[k].group]).max_consecutive_root_failures();
    if (limit <= 0 || !states[k].consecutive_failures.defined()) continue;
    auto slot = worst.select(0, limited++);
    at::amax_out(slot, states[k].consecutive_failures.view(-1), {0});
    slot.sub_(limit - 1);
  }
  if (limited == 0) {
    out.zero_();
    return;
  }
  auto largest = worst.select(0, static_cast<int64_t>(states.size()));
  at::amax_out(largest, worst.narrow(0, 0, limited), {0});
  out.copy_(largest.clamp_min_(0));
}

void raise_root_failure_limit(const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  for (size_t k = 0; k < states.size(); ++k) {
    const auto& stack = stacks[k];
    const auto& options = options_of(groups[stack.group]);
    const auto limit = options.max_consecutive_root_failures();
    if (limit == 0 || !states[k].consecutive_failures.defined()) continue;
    const auto worst = states[k].consecutive_failures.max().item<int64_t>();
    TORCH_CHECK(worst < limit, "dash::Dash: an inverse root in factor stack ", k, " (parameter group ", stack.group,
        ", ", stack.count, " factors of ", stack.size, "×", stack.size, ") failed ", worst,
        " root computations in a row (max_consecutive_root_failures = ", limit,
        "); its preconditioner is stale. diagnostics() counts the failures; a larger root epsilon",
        options.root().method() == RootMethod::EVD ? " usually helps"
                                                   : ", float32 precision or the EVD root method usually helps");
  }
  // Every rank raises: the stack over its limit is another rank's.
  TORCH_CHECK(false,
      "dash::Dash: an inverse root on another rank failed max_consecutive_root_failures computations "
      "in a row; that rank's error names the factor stack");
}

}  // namespace dash::optim
