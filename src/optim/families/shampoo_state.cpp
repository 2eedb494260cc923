#include "optim/families/shampoo_state.h"

#include "optim/state_precision.h"

#include <ATen/ATen.h>

namespace dash::optim {
namespace {

// A field's whole tensor as its presence allocates it: zeros in its storage dtype
// (a bool or an int64 field's own; the float fields' are fixed once allocated).
at::Tensor zeros_of(const FactorStackState& state, const FactorField& field, at::ScalarType dtype) {
  const auto count = state.factors.size(0);
  const auto options = state.factors.options().dtype(dtype);
  if (field.row == FactorRow::Scalar) return at::zeros({count}, options);
  return at::zeros(state.factors.sizes(), options);
}

at::ScalarType fixed_dtype(const FactorField& field, const FactorStackState& state) {
  switch (field.storage) {
    case FieldStorage::Int64:
      return at::kLong;
    case FieldStorage::Bool:
      return at::kBool;
    case FieldStorage::Float32:
      return at::kFloat;
    default:
      return state.factors.scalar_type();
  }
}

at::Tensor counter_zeros(const FactorStackState& state, at::Tensor FactorStackState::*counter) {
  const auto options = state.factors.options().dtype(at::kLong);
  return counter == &FactorStackState::refresh_counts ? at::zeros({3}, options) : at::zeros({}, options);
}

}  // namespace

FactorStackState zero_factor_stack(int64_t count, int64_t size, const DashOptions& options, const at::Device& device) {
  FactorStackState state;
  const auto to = at::TensorOptions().device(device).dtype(at::kFloat);
  state.factors = at::zeros({count, size, size}, to.dtype(storage_dtype(FieldStorage::FactorPrecision, options)));
  // (CPU eye has no bfloat16 kernel in LibTorch 1.13: float32's, converted.)
  state.roots = at::eye(size, to)
                    .to(storage_dtype(FieldStorage::RootPrecision, options))
                    .expand({count, size, size})
                    .contiguous();
  state.failures = counter_zeros(state, &FactorStackState::failures);
  return state;
}

void allocate_factor_fields(FactorStackState& state, FactorPresence presence) {
  for (const auto& field : factor_fields) {
    auto& tensor = state.*field.tensor;
    if (field.presence == presence && !tensor.defined()) tensor = zeros_of(state, field, fixed_dtype(field, state));
  }
  for (const auto& [counter, when] : factor_stack_counters) {
    if (when == presence && !(state.*counter).defined()) state.*counter = counter_zeros(state, counter);
  }
}

at::Tensor factor_row(const FactorStackState& state, const FactorField& field, int64_t row) {
  const auto& tensor = state.*field.tensor;
  if (tensor.defined()) return tensor.select(0, row);
  const auto options = state.factors.options().dtype(fixed_dtype(field, state));
  return field.row == FactorRow::Scalar ? at::zeros({}, options)
                                        : at::zeros({state.factors.size(1), state.factors.size(2)}, options);
}

bool convert_factor_stack(FactorStackState& state, const DashOptions& options) {
  bool roots_converted = false;
  for (const auto& field : factor_fields) {
    const auto storage = field.storage;
    if (storage != FieldStorage::FactorPrecision && storage != FieldStorage::RootPrecision) continue;
    const bool converted = convert_state(state.*field.tensor, storage_dtype(storage, options));
    roots_converted = roots_converted || (converted && field.tensor == &FactorStackState::roots);
  }
  return roots_converted;
}

}  // namespace dash::optim
