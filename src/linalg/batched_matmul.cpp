#include "linalg/batched_matmul.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <vector>

namespace dash::linalg {
namespace {

at::ScalarType sixteen_bit_type(MatmulPrecision precision) {
  return precision == MatmulPrecision::FP16 ? at::kHalf : at::kBFloat16;
}

std::vector<int64_t> product_sizes(const at::Tensor& a, const at::Tensor& b) {
  return {a.size(0), a.size(1), b.size(2)};
}

at::Tensor rounded(const at::Tensor& t, at::ScalarType type, Scratch& scratch) {
  auto staged = scratch.empty(t.sizes(), t.options().dtype(type));
  staged.copy_(t);
  return staged;
}

// 16-bit product of already-rounded operands, written to `out` (iterate dtype).
// LibTorch's CPU backend (1.13) has no half-precision bmm; there the same rounding
// is reproduced exactly in float32 (products of 11-bit mantissas are exact in
// float32's 24 bits) and the sum is rounded to 16 bits afterwards, as a GPU's
// 16-bit bmm output is.
void sixteen_bit_bmm(at::Tensor& out, const at::Tensor& a16, const at::Tensor& b16, Scratch& scratch) {
  auto product16 = scratch.empty(out.sizes(), out.options().dtype(a16.scalar_type()));
  if (a16.is_cpu() && a16.scalar_type() == at::kHalf) {
    TORCH_WARN_ONCE(
        "dash: this LibTorch has no float16 bmm on CPU; FP16 matmuls are emulated "
        "in float32 with float16 rounding of operands and results");
    auto product32 = scratch.empty(out.sizes(), out.options().dtype(at::kFloat));
    at::bmm_out(product32, rounded(a16, at::kFloat, scratch), rounded(b16, at::kFloat, scratch));
    product16.copy_(product32);
  } else {
    at::bmm_out(product16, a16, b16);
  }
  out.copy_(product16);
}

}  // namespace

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision, Scratch& scratch) {
  auto out = scratch.empty(product_sizes(a, b), a.options());
  if (precision == MatmulPrecision::FP32) {
    at::bmm_out(out, a, b);
    return out;
  }
  const auto half = sixteen_bit_type(precision);
  sixteen_bit_bmm(out, rounded(a, half, scratch), rounded(b, half, scratch), scratch);
  return out;
}

at::Tensor& matmul_add_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta, double alpha,
    MatmulPrecision precision, Scratch& scratch) {
  if (precision == MatmulPrecision::FP32) return c.baddbmm_(a, b, beta, alpha);
  auto product = matmul(a, b, precision, scratch);
  // β = 0: C is not read (as in BLAS), so NaN or Inf there does not propagate.
  // (zero_ and add_'s alpha: a Scalar factor of mul_ would allocate a tensor per call.)
  if (beta == 0.0) return c.zero_().add_(product, alpha);
  if (beta != 1.0) c.mul_(beta);
  return c.add_(product, alpha);
}

double unit_roundoff(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return std::ldexp(1.0, -53);
    case at::kHalf:
      return std::ldexp(1.0, -11);
    case at::kBFloat16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

double operand_roundoff(MatmulPrecision precision) {
  return unit_roundoff(precision == MatmulPrecision::FP32 ? at::kFloat : sixteen_bit_type(precision));
}

at::Tensor identity_like(const at::Tensor& like) { return at::eye(like.size(-1), like.options()); }

}  // namespace dash::linalg
