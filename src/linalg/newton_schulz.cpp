#include "linalg/newton_schulz.h"

#include "linalg/batched_matmul.h"
#include "kernels/stack_blas.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::linalg {
namespace {

// A = X Xᵀ: by one syrk per matrix where a CPU BLAS takes the stack (half the
// multiply-adds of a GEMM, and A exactly symmetric), else one batched product.
at::Tensor gram(const at::Tensor& x, MatmulPrecision precision, kernels::Scratch& scratch) {
  if (precision == MatmulPrecision::FP32) {
    auto a = scratch.empty({x.size(0), x.size(1), x.size(1)}, x.options());
    if (kernels::stack_syrk_supported(a, x)) {
      kernels::stack_syrk(a, x, /*transpose_a=*/false, 1.0, 0.0);
      return a;
    }
  }
  return operand_matmul(x, x.transpose(1, 2), precision, scratch);
}

}  // namespace

at::Tensor& newton_schulz_into(at::Tensor& out, const at::Tensor& g, int64_t steps, MatmulPrecision precision,
    kernels::Scratch& scratch, const NewtonSchulzCoefficients& coefficients) {
  TORCH_CHECK(g.dim() == 3 && g.scalar_type() == at::kFloat,
      "dash: newton_schulz_into: expected a float32 (N, rows, cols) stack, got ", g.sizes(), " ", g.scalar_type());
  TORCH_CHECK(out.sizes().equals(g.sizes()) && out.scalar_type() == at::kFloat,
      "dash: newton_schulz_into: the output must be a float32 ", g.sizes(), " stack, got ", out.sizes(), " ",
      out.scalar_type());
  TORCH_CHECK(steps >= 1, "dash: newton_schulz_into: steps must be >= 1, got ", steps);
  const bool tall = g.size(1) > g.size(2);
  const auto wide = tall ? g.transpose(1, 2) : g;
  auto norms = scratch.empty({g.size(0), 1, 1}, g.options());
  at::linalg_vector_norm_out(norms, g, 2, {1, 2}, /*keepdim=*/true);
  norms.add_(1e-7);
  const auto dtype = operand_dtype(precision, at::kFloat);
  auto x = scratch.empty(wide.sizes(), wide.options().dtype(dtype));
  if (dtype == at::kFloat) {
    at::div_out(x, wide, norms);
  } else {
    // All in the operand dtype, as Muon's reference (X in bfloat16, then divided):
    // a division of mixed dtypes into x would take a temporary of the stack's size.
    x.copy_(wide);
    x.div_(scratch.empty(norms.sizes(), norms.options().dtype(dtype)).copy_(norms));
  }
  for (int64_t step = 0; step < steps; ++step) {
    const auto a = gram(x, precision, scratch);
    // A is exactly symmetric and commutes with itself: where a CPU BLAS can, A² is
    // formed one triangle at a time (batched_matmul.h, Product::Symmetric).
    auto b = operand_matmul(a, a, precision, scratch, coefficients.c, Product::Symmetric);
    b.add_(a, coefficients.b);
    auto next = operand_matmul(b, x, precision, scratch);
    x = next.add_(x, coefficients.a);
  }
  (tall ? out.transpose(1, 2) : out).copy_(x);
  return out;
}

double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps, bool one_triangle) {
  const auto m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  const double gram = one_triangle ? m * (m + 1.0) * n : 2.0 * m * m * n;
  const double square = one_triangle ? kernels::symmetric_product_flops(std::min(rows, cols)) : 2.0 * m * m * m;
  return static_cast<double>(steps) * (gram + square + 2.0 * m * m * n);
}

int64_t newton_schulz_bytes_per_matrix(int64_t rows, int64_t cols, MatmulPrecision precision) {
  const int64_t small = std::min(rows, cols);
  const auto operand = static_cast<int64_t>(c10::elementSize(operand_dtype(precision, at::kFloat)));
  return operand * (2 * rows * cols + 2 * small * small) + 4;
}

}  // namespace dash::linalg
