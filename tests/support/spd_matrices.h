#pragma once

// Test inputs with a known spectrum, and the independent float64 reference they
// are checked against.

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace dash::testing {

/// A stack of symmetric matrices A_i = Q_i diag(λ_i) Q_iᵀ, all in float64.
struct KnownSpectrum {
  at::Tensor matrices;     ///< (N, b, b)
  at::Tensor eigenvalues;  ///< (N, b)
  at::Tensor vectors;      ///< (N, b, b), orthogonal
};

/// Random orthogonal Q (Haar, from QR of a Gaussian) for every matrix, seeded.
at::Tensor random_orthogonal(int64_t count, int64_t b, uint64_t seed);

/// Eigenvalues log-spaced from `top` down to top / condition (condition = 1: all equal).
KnownSpectrum log_spaced_spectrum(int64_t count, int64_t b, double condition, uint64_t seed, double top = 1.0);

/// Given eigenvalues (N, b), random eigenvectors.
KnownSpectrum with_eigenvalues(const at::Tensor& eigenvalues, uint64_t seed);

/// The factor A of `spectrum` after `steps` more steps of a Shampoo EMA,
/// A ← βA + (1 − β) G Gᵀ, with gradients G = Q Λ^{1/2} Z / √b (Z standard normal,
/// b × b, seeded) whose second moment is A itself: what a factor looks like one
/// root period later when the gradient statistics do not drift. float64, (N, b, b).
at::Tensor ema_updated(const KnownSpectrum& spectrum, double beta, int64_t steps, uint64_t seed);

/// Q diag((λ + ε)^{-1/p}) Qᵀ in float64, straight from the construction.
at::Tensor reference_inverse_root(const KnownSpectrum& spectrum, double epsilon, int64_t p);

/// (A + εI)^{-1/p} by float64 eigh, for inputs without a known spectrum (negative
/// eigenvalues, from rounding a PSD matrix, are taken as 0).
at::Tensor eigh_inverse_root(const at::Tensor& matrices, double epsilon, int64_t p);

/// ‖X_i − R_i‖_F / ‖R_i‖_F per matrix, in float64 → (N,).
at::Tensor relative_errors(const at::Tensor& result, const at::Tensor& reference);

/// Largest of relative_errors() as a double.
double max_relative_error(const at::Tensor& result, const at::Tensor& reference);

/// Largest |a − b| over all elements, in float64.
double max_difference(const at::Tensor& a, const at::Tensor& b);

}  // namespace dash::testing

namespace dash::testing {

/// Unit roundoff of float32 (2^-24).
constexpr double kFloat32Roundoff = 5.960464477539063e-08;

/// Error floor of an fp32 inverse p-th root of a matrix with condition κ: rounding
/// the input (or an eigh backward error) moves an eigenvalue λ by about u·λ_max·√b,
/// i.e. by κ·u·√b relative to λ_min, and λ^{-1/p} turns that into κ·u·√b/p for the
/// direction of λ_min, which carries the largest weight of the root.
inline double float32_floor(double condition, int64_t b, int64_t p) {
  return condition * kFloat32Roundoff * std::sqrt(static_cast<double>(b)) / static_cast<double>(p);
}

}  // namespace dash::testing
