#include "optim/failure_limit.h"

#include "optim/dash_options.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

void failure_excess_into(at::Tensor out, at::Tensor worst, const std::vector<FailureRecord>& records,
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  TORCH_CHECK(worst.dim() == 1 && worst.size(0) == static_cast<int64_t>(records.size()) + 1,
      "dash: failure_excess_into needs a slot per record and one more, got ", worst.sizes());
  int64_t limited = 0;
  for (const auto& record : records) {
    const auto limit = options_of(groups[record.group]).max_consecutive_root_failures();
    if (limit <= 0 || !record.consecutive.defined()) continue;
    auto slot = worst.select(0, limited++);
    at::amax_out(slot, record.consecutive.view(-1), {0});
    slot.sub_(limit - 1);
  }
  if (limited == 0) {
    out.zero_();
    return;
  }
  auto largest = worst.select(0, static_cast<int64_t>(records.size()));
  at::amax_out(largest, worst.narrow(0, 0, limited), {0});
  out.copy_(largest.clamp_min_(0));
}

void raise_failure_limit(
    const std::vector<FailureRecord>& records, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  for (const auto& record : records) {
    const auto limit = options_of(groups[record.group]).max_consecutive_root_failures();
    if (limit == 0 || !record.consecutive.defined()) continue;
    const auto worst = record.consecutive.max().item<int64_t>();
    TORCH_CHECK(worst < limit, "dash::Dash: ", record.describe(), " failed ", worst,
        " root computations in a row (max_consecutive_root_failures = ", limit,
        "); its preconditioner is stale. diagnostics() counts the failures; ", record.remedy());
  }
  // Every rank raises: the stack over its limit is another rank's.
  TORCH_CHECK(false,
      "dash::Dash: an inverse root on another rank failed max_consecutive_root_failures computations "
      "in a row; that rank's error names the factor stack");
}

}  // namespace dash::optim
