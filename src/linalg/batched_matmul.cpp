#include "linalg/batched_matmul.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::linalg {
namespace {

at::ScalarType sixteen_bit_type(MatmulPrecision precision) {
  return precision == MatmulPrecision::FP16 ? at::kHalf : at::kBFloat16;
}

// 16-bit product of already-rounded operands. LibTorch's CPU backend (1.13) has no
// half-precision bmm; there the same rounding is reproduced exactly in float32
// (products of 11-bit mantissas are exact in float32's 24 bits) and the sum is
// rounded to 16 bits afterwards, as a GPU's 16-bit bmm output is.
at::Tensor sixteen_bit_bmm(const at::Tensor& a16, const at::Tensor& b16) {
  if (a16.is_cpu() && a16.scalar_type() == at::kHalf) {
    TORCH_WARN_ONCE(
        "dash: this LibTorch has no float16 bmm on CPU; FP16 matmuls are emulated "
        "in float32 with float16 rounding of operands and results");
    return at::bmm(a16.to(at::kFloat), b16.to(at::kFloat)).to(at::kHalf);
  }
  return at::bmm(a16, b16);
}

}  // namespace

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision) {
  if (precision == MatmulPrecision::FP32) {
    return at::bmm(a, b);
  }
  const auto half = sixteen_bit_type(precision);
  return sixteen_bit_bmm(a.to(half), b.to(half)).to(a.scalar_type());
}

at::Tensor matmul_add(
    const at::Tensor& c,
    const at::Tensor& a,
    const at::Tensor& b,
    double beta,
    double alpha,
    MatmulPrecision precision) {
  if (precision == MatmulPrecision::FP32) {
    return at::baddbmm(c, a, b, beta, alpha);
  }
  auto product = matmul(a, b, precision);
  return beta == 1.0 ? at::add(c, product, alpha) : at::add(c * beta, product, alpha);
}

at::Tensor identity_like(const at::Tensor& like) {
  return at::eye(like.size(-1), like.options());
}

}  // namespace dash::linalg
