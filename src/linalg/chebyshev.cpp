// Chebyshev approximation of x^{-1/p} evaluated with Clenshaw's recurrence
// (Trefethen, "Approximation Theory and Approximation Practice", ch. 3–4;
// spec §5 "Chebyshev + Clenshaw").
//
// The normalised spectrum (δ, 1] is mapped to [−1, 1] by
// S = (2Â − (1 + δ) I)/(1 − δ). The interpolant at the d + 1 Chebyshev points of
// the first kind has coefficients c_k = (2/(d+1)) Σ_j f(x_j) cos(k θ_j) (c₀ halved).
// Clenshaw: b_{d+1} = b_{d+2} = 0, b_k = 2 S b_{k+1} − b_{k+2} + c_k I, and the
// value is S b₁ − b₂ + c₀ I: d − 1 matmuls in all, each of two polynomials in S,
// so symmetric (Product::Symmetric: one triangle on a CPU).
//
// The error falls like ρ^{-d} with ρ ≈ 1 + 2√δ: accurate for well-conditioned
// blocks, an implicit regulariser for the rest.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>

#include <c10/util/Exception.h>
#include <c10/util/MathConstants.h>

namespace dash::linalg {
namespace {

// Coefficients (N, d + 1) of the degree-d interpolant of x^{-1/p} on [δ_i, 1],
// one row per matrix since δ depends on each matrix's scale. Built on the device.
at::Tensor chebyshev_coefficients(const at::Tensor& lower, int64_t degree, int64_t p) {
  const int64_t points = degree + 1;
  auto options = lower.options();
  auto theta = (at::arange(points, options) + 0.5) * (c10::pi<double> / static_cast<double>(points));
  auto nodes = at::cos(theta);                           // (d+1,) in (−1, 1)
  auto x = lower + (1.0 - lower) * (nodes + 1.0) * 0.5;  // (N, d+1)
  auto values = x.pow(-1.0 / static_cast<double>(p));
  auto cosines = at::cos(at::outer(theta, at::arange(points, options)));  // [j, k] = cos(k θ_j)
  auto coefficients = at::matmul(values, cosines) * (2.0 / static_cast<double>(points));
  coefficients.select(1, 0).mul_(0.5);
  return coefficients;
}

}  // namespace

at::Tensor chebyshev_root(const at::Tensor& normalized, const at::Tensor& epsilon, int64_t p,
    const ChebyshevOptions& options, MatmulPrecision precision, kernels::Scratch& scratch) {
  const int64_t degree = options.degree();
  const auto identity = identity_like(normalized);
  auto lower = epsilon.reshape({-1, 1}).clamp_min(options.interval_min());  // δ, (N, 1)
  // One contiguous (N, 1, 1) column per coefficient, made once.
  auto coefficients = chebyshev_coefficients(lower, degree, p).t().contiguous().unsqueeze(-1).unsqueeze(-1);
  auto coefficient = [&](int64_t k) { return coefficients[k]; };
  auto width = (1.0 - lower).reshape({-1, 1, 1});
  auto s = normalized * (2.0 / width) - identity * ((1.0 + lower.reshape({-1, 1, 1})) / width);

  // b_{d+1} = 0 makes b_d = c_d I and b_{d−1} = 2 c_d S + c_{d−1} I: no matmuls yet.
  if (degree == 1) {
    return s * coefficient(1) + identity * coefficient(0);
  }
  // c_k I − b_{k+2}, the additive term of each Clenshaw step, in a Scratch buffer.
  auto shift = [&](int64_t k, const at::Tensor& next) {
    auto out = scratch.empty_like(next);
    at::mul_out(out, identity, coefficient(k));
    return out.sub_(next);
  };
  auto next = identity * coefficient(degree);                                           // b_{k+2}
  auto current = s * (2.0 * coefficient(degree)) + identity * coefficient(degree - 1);  // b_{k+1}
  // S feeds every step's product: rounded to the operand dtype once.
  const auto s_operand = as_operand(s, precision, scratch);
  for (int64_t k = degree - 2; k >= 1; --k) {
    auto updated = shift(k, next);
    matmul_add_(updated, s_operand, current, 1.0, 2.0, precision, scratch, Product::Symmetric);
    next = std::move(current);
    current = std::move(updated);
  }
  auto value = shift(0, next);
  return matmul_add_(value, s_operand, current, 1.0, 1.0, precision, scratch, Product::Symmetric);
}

}  // namespace dash::linalg
