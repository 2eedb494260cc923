#include "optim/root_failure_limit.h"

#include "optim/dash_options.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

at::Tensor root_failure_limit_exceeded(const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::vector<at::Tensor> exceeded;
  for (size_t k = 0; k < states.size(); ++k) {
    const auto limit = options_of(groups[stacks[k].group]).max_consecutive_root_failures();
    if (limit > 0 && states[k].consecutive_failures.defined()) {
      exceeded.push_back((states[k].consecutive_failures.max() >= limit).to(at::kFloat));
    }
  }
  return exceeded.empty() ? at::Tensor() : at::stack(exceeded).max();
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
