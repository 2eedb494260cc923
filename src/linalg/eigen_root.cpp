// Inverse root by symmetric eigendecomposition (spec §5, "EVD"): the baseline
// of Distributed Shampoo, here over the whole stack at once (one batched call on
// a GPU; on a CPU one range of the stack per core, stack_lapack.h).

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"
#include "kernels/stack_blas.h"
#include "kernels/stack_lapack.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <tuple>
#include <utility>

namespace dash::linalg {

// eigh of the stack; if LAPACK/cuSOLVER fails in float32, once more in float64
// (spec §5: "if eigh fails, retry in float64").
at::Tensor batched_eigh(const at::Tensor& a, const at::Tensor& vectors) {
  try {
    return kernels::stack_eigh(a, vectors);
  } catch (const c10::Error& first_failure) {
    TORCH_CHECK(a.scalar_type() != at::kDouble,
        "dash::inverse_root: eigh failed in float64: ", first_failure.what_without_backtrace());
    TORCH_WARN("dash::inverse_root: eigh failed in float32, retrying in float64");
    try {
      auto wide = a.to(at::kDouble);
      auto wide_vectors = kernels::column_major_view(at::empty_like(wide, at::MemoryFormat::Contiguous));
      auto values = kernels::stack_eigh(wide, wide_vectors);
      vectors.copy_(wide_vectors);
      return values.to(a.scalar_type());
    } catch (const c10::Error& second_failure) {
      TORCH_CHECK(false,
          "dash::inverse_root: eigh failed in float32 and in float64: ", second_failure.what_without_backtrace());
    }
  }
}

namespace {

// λ^{-1/p} after the chosen repair of the eigenvalues; `epsilon` is (N, 1).
at::Tensor repaired_inverse_power(
    const at::Tensor& values, const at::Tensor& epsilon, int64_t p, EigenHeuristic heuristic) {
  const double exponent = -1.0 / static_cast<double>(p);
  switch (heuristic) {
    case EigenHeuristic::Shampoo: {
      auto shift = std::get<0>(values.min(/*dim=*/1, /*keepdim=*/true)).clamp_max(0.0);
      return (values - shift + epsilon).pow(exponent);
    }
    case EigenHeuristic::Abs:
      return values.abs().pow(exponent);
    case EigenHeuristic::AbsAdd:
      return (values.abs() + epsilon).pow(exponent);
    case EigenHeuristic::PseudoInverse: {
      auto kept = values > epsilon;
      // Only kept eigenvalues are inverted; the others are replaced by 1 first so
      // that no Inf is ever formed (an Inf times a zero weight would be NaN).
      return at::where(kept, at::where(kept, values, at::ones_like(values)).pow(exponent), at::zeros_like(values));
    }
  }
  TORCH_CHECK(false, "dash::inverse_root: unknown eigen heuristic");
}

}  // namespace

at::Tensor root_from_eigenbasis(const at::Tensor& values, const at::Tensor& vectors, const at::Tensor& epsilon,
    int64_t p, EigenHeuristic heuristic, MatmulPrecision precision, at::Tensor scaled, kernels::Scratch& scratch) {
  // The repaired f is ≥ 0, as the S·Sᵀ form needs: a power of a positive number, or
  // 0 for PseudoInverse's dropped eigenvalues.
  return root_from_eigenvalue_function(repaired_inverse_power(values, epsilon.squeeze(-1), p, heuristic), vectors,
      precision, std::move(scaled), scratch);
}

at::Tensor root_from_eigenvalue_function(at::Tensor function_values, const at::Tensor& vectors,
    MatmulPrecision precision, at::Tensor scaled, kernels::Scratch& scratch) {
  // S Sᵀ = Q diag(f) Qᵀ with S = Q diag(√f): one batched matmul, and S overwrites Q
  // where the caller no longer needs Q (no third stack-sized buffer). An infinite
  // or NaN f (a diverged NewtonDB iteration) gives a non-finite root, which
  // dash::Dash rejects as a failed root computation.
  at::mul_out(scaled, vectors, function_values.sqrt_().unsqueeze(1));
  if (operand_dtype(precision, scaled.scalar_type()) == scaled.scalar_type() &&
      kernels::stack_syrk_plan(scaled.device()).one_triangle) {
    // On a CPU, syrk forms S Sᵀ at half the multiply-adds, exactly symmetric.
    // LAPACK's eigenvectors are column-major: then Sᵀ has rows, and S Sᵀ = (Sᵀ)ᵀ Sᵀ.
    const bool column_major = scaled.stride(1) == 1 && scaled.stride(2) != 1;
    const auto rows = column_major ? scaled.transpose(1, 2) : scaled;
    auto product = scratch.empty_like(scaled);
    if (kernels::stack_syrk_supported(product, rows)) {
      kernels::stack_syrk(product, rows, /*transpose_a=*/column_major, 1.0, 0.0);
      return product;
    }
  }
  const auto operand = as_operand(scaled, precision, scratch);  // rounded once for both factors
  return in_dtype(operand_matmul(operand, operand.transpose(1, 2), precision, scratch), scaled.scalar_type(), scratch);
}

}  // namespace dash::linalg
