#include "optim/state_precision.h"

#include "linalg/stack_lapack.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {
namespace {

// dst ← src (converting), over the cores where ATen's pool has one thread
// (linalg::for_each_pass_range): a conversion is a pass over memory, which one core
// alone cannot saturate.
void convert_into(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.dim() == 0 || dst.size(0) < 2) {
    dst.copy_(src);
    return;
  }
  (void)dst.data_ptr();  // on this thread (for_each_pass_range)
  const auto bytes = static_cast<double>(dst.numel() * (dst.element_size() + src.element_size()));
  linalg::for_each_pass_range(
      dst, bytes, [&](int64_t first, int64_t last) { dst.slice(0, first, last).copy_(src.slice(0, first, last)); });
}

}  // namespace

at::ScalarType state_dtype(MatmulPrecision precision) {
  TORCH_CHECK(precision != MatmulPrecision::FP16, "dash::Dash: optimizer state in fp16 is not supported");
  return precision == MatmulPrecision::BF16 ? at::kBFloat16 : at::kFloat;
}

bool convert_state(at::Tensor& state, at::ScalarType dtype) {
  if (!state.defined() || state.scalar_type() == dtype) return false;
  state = state.to(dtype);
  return true;
}

at::Tensor converted(const at::Tensor& tensor, at::ScalarType dtype, linalg::Scratch& scratch) {
  if (!tensor.defined() || tensor.scalar_type() == dtype) return tensor;
  auto converted = scratch.empty(tensor.sizes(), tensor.options().dtype(dtype));
  convert_into(converted, tensor);
  return converted;
}

at::Tensor widened(const at::Tensor& stored, linalg::Scratch& scratch) {
  return converted(stored, at::kFloat, scratch);
}

void store_rounded(const at::Tensor& stored, const at::Tensor& computed) {
  if (!stored.defined() || stored.is_same(computed)) return;
  convert_into(stored, computed);
}

}  // namespace dash::optim
