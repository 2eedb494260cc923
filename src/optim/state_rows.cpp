#include "optim/state_rows.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

void copy_optional_row(
    at::Tensor& into, at::IntArrayRef shape, int64_t row, const at::Tensor& saved_row, const at::Device& device) {
  if (!saved_row.defined()) return;
  if (!into.defined()) into = at::zeros(shape, saved_row.options().device(device));
  into.select(0, row).copy_(saved_row);
}

void settle_loaded_stack(
    FactorStackState& into, const std::set<int64_t>& executions, const std::set<int64_t>& methods) {
  const auto counter = at::TensorOptions().dtype(at::kLong).device(into.factors.device());
  if (into.consecutive_failures.defined() && !into.factor_resets.defined()) into.factor_resets = at::zeros({}, counter);
  if (into.basis.vectors.defined() && !into.refresh_counts.defined()) into.refresh_counts = at::zeros({3}, counter);
  for (const auto value : executions) {
    TORCH_CHECK(value >= -1 && value <= static_cast<int64_t>(Execution::Auto),
        "dash::Dash: corrupt checkpoint (root execution ", value, ")");
  }
  for (const auto value : methods) {
    TORCH_CHECK(value >= -1 && value <= static_cast<int64_t>(RootMethod::Auto),
        "dash::Dash: corrupt checkpoint (root method ", value, ")");
  }
  if (executions.size() == 1 && *executions.begin() >= 0) {
    into.root_execution = static_cast<Execution>(*executions.begin());
    into.calibration_pending = into.root_execution == Execution::Auto;
  }
  if (methods.size() == 1 && *methods.begin() >= 0) into.root_method = static_cast<RootMethod>(*methods.begin());
}

}  // namespace dash::optim
