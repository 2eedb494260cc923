// estimate_spectral_scale: Frobenius bounds λ_max from above; power iteration
// lands in [λ_max, margin·λ_max] once it has converged.

#include <dash/inverse_root.h>

#include "support/spd_matrices.h"

#include <gtest/gtest.h>

namespace dash {
namespace {

using testing::log_spaced_spectrum;

TEST(SpectralScale, FrobeniusIsTheFrobeniusNorm) {
  auto spectrum = log_spaced_spectrum(3, 16, 1e2, 61, /*top=*/7.0);
  auto s = estimate_spectral_scale(spectrum.matrices, InverseRootOptions().scaling(Scaling::Frobenius));
  ASSERT_EQ(s.sizes(), at::IntArrayRef({3, 1, 1}));
  auto expected = at::linalg_vector_norm(spectrum.eigenvalues, 2, {1});  // ‖A‖_F = ‖λ‖₂
  EXPECT_TRUE(at::allclose(s.flatten(), expected, 1e-12, 0.0));
}

// A spectral gap λ₂/λ₁ = 0.5 makes 10 power steps accurate to 0.5^20 ≈ 1e-6 in the
// Rayleigh sense; the estimate is ‖A v‖ ≤ λ_max, so s/margin ∈ [0.99 λ_max, λ_max].
TEST(SpectralScale, PowerIterationFindsLambdaMaxTimesMargin) {
  auto eigenvalues = at::linspace(0.5, 0.01, 32, at::kDouble).expand({4, 32}).contiguous();
  eigenvalues.select(1, 0).fill_(1.0);
  auto spectrum = testing::with_eigenvalues(eigenvalues * at::tensor({1.0, 1e-8, 1e8, 3.0}, at::kDouble).unsqueeze(1), 62);
  auto lambda_max = std::get<0>(spectrum.eigenvalues.max(1));
  for (auto scaling : {Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    auto options = InverseRootOptions().scaling(scaling).power_margin(2.0);
    auto s = estimate_spectral_scale(spectrum.matrices.to(at::kFloat), options).flatten().to(at::kDouble);
    auto ratio = s / (2.0 * lambda_max);
    EXPECT_TRUE((ratio <= 1.0 + 1e-5).all().item<bool>()) << ratio;
    EXPECT_TRUE((ratio >= 0.99).all().item<bool>()) << ratio;
  }
}

// All-zero blocks must give s = 0, not 0/0.
TEST(SpectralScale, ZeroMatrixGivesZeroNotNaN) {
  for (auto scaling : {Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    auto s = estimate_spectral_scale(at::zeros({2, 8, 8}), InverseRootOptions().scaling(scaling));
    EXPECT_TRUE(at::equal(s, at::zeros({2, 1, 1})));
  }
}

// Entries near float32's limits: squaring them would overflow ‖A‖_F.
TEST(SpectralScale, HugeAndTinyEntriesStayFinite) {
  auto spectrum = log_spaced_spectrum(2, 8, 10.0, 63);
  for (double magnitude : {1e30, 1e-30}) {
    auto a = (spectrum.matrices * magnitude).to(at::kFloat);
    for (auto scaling : {Scaling::Frobenius, Scaling::MultiPowerIteration}) {
      auto s = estimate_spectral_scale(a, InverseRootOptions().scaling(scaling)).to(at::kDouble) / magnitude;
      EXPECT_TRUE((s >= 0.99).all().item<bool>() && (s <= 2.0 * 8).all().item<bool>()) << s;
    }
    auto root = inverse_root(a, 4, InverseRootOptions().epsilon(0.0));
    EXPECT_LE(testing::max_relative_error(root.to(at::kDouble) * std::pow(magnitude, 0.25),
                  testing::reference_inverse_root(spectrum, 0.0, 4)), 1e-4);
  }
}

// Multi-vector power iteration is robust to a start vector orthogonal to the top
// eigenvector: with the top eigenvector e₀ and the bulk far below, a single
// vector that misses e₀ underestimates badly; 16 do not all miss it.
TEST(SpectralScale, MultiVectorEstimateIsNeverBelowSingleVector) {
  auto spectrum = log_spaced_spectrum(6, 48, 1e3, 64);
  auto a = spectrum.matrices.to(at::kFloat);
  auto single = estimate_spectral_scale(a, InverseRootOptions().scaling(Scaling::PowerIteration));
  auto multi = estimate_spectral_scale(a, InverseRootOptions().scaling(Scaling::MultiPowerIteration));
  EXPECT_TRUE((multi >= single * (1 - 1e-6)).all().item<bool>());
}

}  // namespace
}  // namespace dash
