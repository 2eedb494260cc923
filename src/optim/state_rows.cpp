#include "optim/state_rows.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>
#include <vector>

namespace dash::optim {

namespace {

template <typename State>  // FactorStackState, const or not
auto& tensor_of(State& state, OptionalRow which) {
  switch (which) {
    case OptionalRow::ConsecutiveFailures:
      return state.consecutive_failures;
    case OptionalRow::Eigenvectors:
      return state.basis.vectors;
    case OptionalRow::EigenbasisValid:
      break;
  }
  return state.basis.valid;
}

// The whole tensor's shape and options, as the first root computation allocates it
// (optim/root_refresh.cpp).
std::pair<std::vector<int64_t>, at::TensorOptions> layout_of(const FactorStackState& state, OptionalRow which) {
  const auto device = at::TensorOptions().device(state.factors.device());
  const auto count = state.factors.size(0);
  switch (which) {
    case OptionalRow::ConsecutiveFailures:
      return {{count}, device.dtype(at::kLong)};
    case OptionalRow::Eigenvectors:
      return {state.factors.sizes().vec(), device.dtype(at::kFloat)};
    case OptionalRow::EigenbasisValid:
      break;
  }
  return {{count}, device.dtype(at::kBool)};
}

}  // namespace

at::Tensor optional_row(const FactorStackState& state, OptionalRow which, int64_t row) {
  const auto& tensor = tensor_of(state, which);
  if (tensor.defined()) return tensor.select(0, row);
  const auto [shape, options] = layout_of(state, which);
  return at::zeros(at::IntArrayRef(shape).slice(1), options);
}

void copy_optional_row(
    FactorStackState& into, OptionalRow which, int64_t row, const at::Tensor& saved_row, const std::string& what) {
  if (!saved_row.defined()) return;
  const auto [shape, options] = layout_of(into, which);
  // (An eigenbasis is in the roots' working precision: float32 here, but any floating dtype reads.)
  const bool dtype_fits = which == OptionalRow::Eigenvectors ? at::isFloatingType(saved_row.scalar_type())
                                                             : saved_row.scalar_type() == options.dtype();
  TORCH_CHECK(saved_row.sizes() == at::IntArrayRef(shape).slice(1) && dtype_fits, "dash::Dash: '", what, "' is ",
      saved_row.sizes(), " ", saved_row.scalar_type(), ", expected ", at::IntArrayRef(shape).slice(1), " ",
      options.dtype(), " (saved for other parameters or options?)");
  auto& tensor = tensor_of(into, which);
  if (!tensor.defined()) tensor = at::zeros(shape, options);
  tensor.select(0, row).copy_(saved_row);
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
