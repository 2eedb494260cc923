#include "optim/state_fields.h"

#include "optim/state_precision.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

at::ScalarType storage_dtype(FieldStorage storage, const DashOptions& options) {
  switch (storage) {
    case FieldStorage::MomentPrecision:
      return state_dtype(options.moment_precision());
    case FieldStorage::FactorPrecision:
      return state_dtype(options.factor_precision());
    case FieldStorage::RootPrecision:
      return state_dtype(options.root_precision());
    case FieldStorage::Float32:
      return at::kFloat;
    case FieldStorage::Int64:
      return at::kLong;
    case FieldStorage::Bool:
      break;
  }
  return at::kBool;
}

void check_values(const at::Tensor& saved, FieldValues values, const std::string& what) {
  if (values == FieldValues::Flag || saved.numel() == 0) return;
  const bool integral = !at::isFloatingType(saved.scalar_type());
  const bool finite = integral || at::isfinite(saved).all().item<bool>();
  TORCH_CHECK(finite, "dash::Dash: ", what,
      " holds NaN or infinite values; a step from it would make the parameters NaN (the state is damaged: load an "
      "intact copy)");
  if (values == FieldValues::Real) return;
  TORCH_CHECK(!(saved < 0).any().item<bool>(), "dash::Dash: ", what, " holds negative values (",
      saved.min().item<double>(), "), which ", values == FieldValues::Count ? "a count" : "a second moment",
      " cannot have (the state is damaged: load an intact copy)");
  if (values == FieldValues::NonNegative || integral) return;
  TORCH_CHECK(at::equal(saved, saved.round()), "dash::Dash: ", what,
      " holds fractional values where it counts steps (the state is damaged: load an intact copy)");
}

void copy_entry(at::Tensor into, const at::Tensor& saved, FieldValues values, const std::string& what) {
  TORCH_CHECK(saved.sizes() == into.sizes() && saved.scalar_type() == into.scalar_type(), "dash::Dash: ", what, " is ",
      saved.sizes(), " ", saved.scalar_type(), ", this optimizer's ", into.sizes(), " ", into.scalar_type(),
      " (saved for other parameters or options?)");
  check_values(saved, values, what);
  into.copy_(saved);
}

}  // namespace dash::optim
