#include "optim/state_precision.h"

#include "linalg/batched_matmul.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

at::ScalarType state_dtype(MatmulPrecision precision) {
  TORCH_CHECK(precision != MatmulPrecision::FP16, "dash::Dash: optimizer state in fp16 is not supported");
  return precision == MatmulPrecision::BF16 ? at::kBFloat16 : at::kFloat;
}

bool convert_state(at::Tensor& state, at::ScalarType dtype) {
  if (!state.defined() || state.scalar_type() == dtype) return false;
  state = state.to(dtype);
  return true;
}

at::Tensor widened(const at::Tensor& stored, kernels::Scratch& scratch) {
  return stored.defined() ? linalg::in_dtype(stored, at::kFloat, scratch) : stored;
}

void store_rounded(const at::Tensor& stored, const at::Tensor& computed) {
  if (!stored.defined() || stored.is_same(computed)) return;
  kernels::copy_over_cores(stored, computed);
}

}  // namespace dash::optim
