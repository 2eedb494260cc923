// Inverse root by symmetric eigendecomposition (spec §5, "EVD"): the baseline
// of Distributed Shampoo, batched here over the whole stack in one eigh call.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <tuple>

namespace dash::linalg {

// One batched eigh; if LAPACK/cuSOLVER fails in float32, once more in float64
// (spec §5: "if eigh fails, retry in float64").
std::tuple<at::Tensor, at::Tensor> batched_eigh(const at::Tensor& a) {
  try {
    return at::linalg_eigh(a);
  } catch (const c10::Error& first_failure) {
    TORCH_CHECK(a.scalar_type() != at::kDouble,
        "dash::inverse_root: eigh failed in float64: ", first_failure.what_without_backtrace());
    TORCH_WARN("dash::inverse_root: eigh failed in float32, retrying in float64");
    try {
      auto [values, vectors] = at::linalg_eigh(a.to(at::kDouble));
      return {values.to(a.scalar_type()), vectors.to(a.scalar_type())};
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
    int64_t p, EigenHeuristic heuristic, MatmulPrecision precision, Scratch& scratch) {
  auto weights = repaired_inverse_power(values, epsilon.squeeze(-1), p, heuristic);
  // Q · diag(w) · Qᵀ as one batched matmul of (Q scaled by columns) and Qᵀ.
  return matmul(vectors * weights.unsqueeze(1), vectors.transpose(1, 2), precision, scratch);
}

}  // namespace dash::linalg
