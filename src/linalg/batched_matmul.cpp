#include "linalg/batched_matmul.h"

#include "kernels/stack_blas.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <vector>

namespace dash::linalg {
namespace {

at::ScalarType sixteen_bit_type(MatmulPrecision precision) {
  return precision == MatmulPrecision::FP16 ? at::kHalf : at::kBFloat16;
}

bool is_sixteen_bit(const at::Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

std::vector<int64_t> product_sizes(const at::Tensor& a, const at::Tensor& b) {
  return {a.size(0), a.size(1), b.size(2)};
}

// c ← beta · c + alpha · a @ b by the split GEMMs of stack_blas.h, one triangle of
// a symmetric product, where they take the stacks (a CPU whose OpenBLAS the stack
// split controls: one bmm on OpenBLAS's own threads would leave a worker spinning
// that slows the split products after it). False where they do not.
bool split_blas_product(
    at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta, Product product) {
  if (product == Product::Symmetric && kernels::stack_symmetric_product_supported(c, a, b)) {
    kernels::stack_symmetric_product(c, a, b, alpha, beta);
    return true;
  }
  if (kernels::stack_gemm_supported(c, a, b)) {
    kernels::stack_gemm(c, a, b, alpha, beta);
    return true;
  }
  return false;
}

// c = alpha · a @ b: what c held is never read (an uninitialised Scratch buffer,
// or NaN, does not propagate).
void product_into(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, Product product) {
  if (split_blas_product(c, a, b, alpha, /*beta=*/0.0, product)) return;
  // 16-bit products over the cores (oneDNN's one call may have a single thread);
  // the others in one call, on OpenBLAS's threads.
  if (is_sixteen_bit(c)) {
    kernels::stack_bmm_out(c, a, b, alpha);
  } else {
    kernels::bmm_out_scaled(c, a, b, alpha);
  }
}

// alpha times the 16-bit product of 16-bit operands, in a Scratch buffer of their
// dtype. LibTorch's CPU backend (1.13) has no half-precision bmm; there the same
// rounding is reproduced exactly in float32 (products of 11-bit mantissas are
// exact in float32's 24 bits) and the sum is rounded to 16 bits afterwards, as a
// GPU's 16-bit bmm output is.
at::Tensor sixteen_bit_bmm(const at::Tensor& a16, const at::Tensor& b16, double alpha, kernels::Scratch& scratch) {
  auto product16 = scratch.empty(product_sizes(a16, b16), a16.options());
  if (a16.is_cpu() && a16.scalar_type() == at::kHalf) {
    TORCH_WARN_ONCE(
        "dash: this LibTorch has no float16 bmm on CPU; FP16 matmuls are emulated "
        "in float32 with float16 rounding of operands and results");
    auto product32 = scratch.empty(product16.sizes(), product16.options().dtype(at::kFloat));
    product_into(
        product32, in_dtype(a16, at::kFloat, scratch), in_dtype(b16, at::kFloat, scratch), alpha, Product::General);
    product16.copy_(product32);
  } else {
    product_into(product16, a16, b16, alpha, Product::General);
  }
  return product16;
}

}  // namespace

at::ScalarType operand_dtype(MatmulPrecision precision, at::ScalarType iterate) {
  return precision == MatmulPrecision::FP32 ? iterate : sixteen_bit_type(precision);
}

at::Tensor as_operand(const at::Tensor& t, MatmulPrecision precision, kernels::Scratch& scratch) {
  return in_dtype(t, operand_dtype(precision, t.scalar_type()), scratch);
}

at::Tensor operand_matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision,
    kernels::Scratch& scratch, double alpha, Product product) {
  if (precision == MatmulPrecision::FP32) {
    auto out = scratch.empty(product_sizes(a, b), a.options());
    product_into(out, a, b, alpha, product);
    return out;
  }
  // 16-bit products are whole GEMMs: the float32 emulation on a CPU reproduces a
  // GPU's 16-bit bmm, which has no one-triangle form.
  return sixteen_bit_bmm(as_operand(a, precision, scratch), as_operand(b, precision, scratch), alpha, scratch);
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision, kernels::Scratch& scratch) {
  const auto iterate = !is_sixteen_bit(a) ? a.scalar_type() : !is_sixteen_bit(b) ? b.scalar_type() : at::kFloat;
  return in_dtype(operand_matmul(a, b, precision, scratch), iterate, scratch);
}

at::Tensor& matmul_add_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta, double alpha,
    MatmulPrecision precision, kernels::Scratch& scratch, Product product) {
  if (precision == MatmulPrecision::FP32) {
    if (beta == 0.0) {
      product_into(c, a, b, alpha, product);
      return c;
    }
    if (split_blas_product(c, a, b, alpha, beta, product)) return c;
    return c.baddbmm_(a, b, beta, alpha);
  }
  const auto sum = widened(operand_matmul(a, b, precision, scratch), c.scalar_type(), scratch);
  // β = 0: C is not read (as in BLAS), so NaN or Inf there does not propagate.
  // (zero_ and add_'s alpha: a Scalar factor of mul_ would allocate a tensor per call.)
  if (beta == 0.0) return c.zero_().add_(sum, alpha);
  if (beta != 1.0) c.mul_(beta);
  return c.add_(sum, alpha);
}

at::Tensor widened(const at::Tensor& t, at::ScalarType dtype, kernels::Scratch& scratch) {
  return t.is_cuda() ? t : in_dtype(t, dtype, scratch);
}

void add_to_diagonal(at::Tensor& t, const at::Tensor& values, kernels::Scratch& scratch) {
  auto diagonal = t.diagonal(0, -2, -1);
  if (t.scalar_type() == values.scalar_type()) {
    diagonal.add_(values);
    return;
  }
  // (N, b) elements: the widening copies cost nothing next to the stack.
  auto wide = scratch.empty(diagonal.sizes(), values.options());
  diagonal.copy_(wide.copy_(diagonal).add_(values));
}

at::Tensor in_dtype(const at::Tensor& t, at::ScalarType dtype, kernels::Scratch& scratch) {
  if (t.scalar_type() == dtype) return t;
  auto converted = scratch.empty(t.sizes(), t.options().dtype(dtype));
  kernels::copy_over_cores(converted, t);
  return converted;
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
