// estimate_spectral_scale: Frobenius bounds λ_max from above; power iteration
// lands in [λ_max, margin·λ_max] once it has converged.

#include <dash/inverse_root.h>

#include "linalg/solvers.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

namespace dash {
namespace {

using testing::log_spaced_spectrum;

TEST(SpectralScale, FrobeniusIsTheFrobeniusNorm) {
  auto spectrum = log_spaced_spectrum(3, 16, 1e2, 61, /*top=*/7.0);
  auto s = estimate_spectral_scale(spectrum.matrices, SpectralScaleOptions().method(Scaling::Frobenius));
  ASSERT_EQ(s.sizes(), at::IntArrayRef({3, 1, 1}));
  auto expected = at::linalg_vector_norm(spectrum.eigenvalues, 2, {1});  // ‖A‖_F = ‖λ‖₂
  EXPECT_TRUE(at::allclose(s.flatten(), expected, 1e-12, 0.0));
}

// A spectral gap λ₂/λ₁ = 0.5 makes 10 power steps accurate to 0.5^20 ≈ 1e-6 in the
// Rayleigh sense; the estimate is ‖A v‖ ≤ λ_max, so s/margin ∈ [0.99 λ_max, λ_max].
TEST(SpectralScale, PowerIterationFindsLambdaMaxTimesMargin) {
  auto eigenvalues = at::linspace(0.5, 0.01, 32, at::kDouble).expand({4, 32}).contiguous();
  eigenvalues.select(1, 0).fill_(1.0);
  auto spectrum =
      testing::with_eigenvalues(eigenvalues * at::tensor({1.0, 1e-8, 1e8, 3.0}, at::kDouble).unsqueeze(1), 62);
  auto lambda_max = std::get<0>(spectrum.eigenvalues.max(1));
  for (auto scaling : {Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    auto options = SpectralScaleOptions().method(scaling).margin(2.0);
    auto s = estimate_spectral_scale(spectrum.matrices.to(at::kFloat), options).flatten().to(at::kDouble);
    auto ratio = s / (2.0 * lambda_max);
    EXPECT_TRUE((ratio <= 1.0 + 1e-5).all().item<bool>()) << ratio;
    EXPECT_TRUE((ratio >= 0.99).all().item<bool>()) << ratio;
  }
}

// All-zero blocks must give s = 0, not 0/0.
TEST(SpectralScale, ZeroMatrixGivesZeroNotNaN) {
  for (auto scaling : {Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    auto s = estimate_spectral_scale(at::zeros({2, 8, 8}), SpectralScaleOptions().method(scaling));
    EXPECT_TRUE(at::equal(s, at::zeros({2, 1, 1})));
  }
}

// Entries near float32's limits: squaring them would overflow ‖A‖_F.
TEST(SpectralScale, HugeAndTinyEntriesStayFinite) {
  auto spectrum = log_spaced_spectrum(2, 8, 10.0, 63);
  for (double magnitude : {1e30, 1e-30}) {
    auto a = (spectrum.matrices * magnitude).to(at::kFloat);
    for (auto scaling : {Scaling::Frobenius, Scaling::MultiPowerIteration}) {
      auto s = estimate_spectral_scale(a, SpectralScaleOptions().method(scaling)).to(at::kDouble) / magnitude;
      EXPECT_TRUE((s >= 0.99).all().item<bool>() && (s <= 2.0 * 8).all().item<bool>()) << s;
    }
    auto root = inverse_root(a, 4, dash::testing::solver_options(RootMethod::NewtonDB).epsilon(0.0));
    EXPECT_LE(testing::max_relative_error(
                  root.to(at::kDouble) * std::pow(magnitude, 0.25), testing::reference_inverse_root(spectrum, 0.0, 4)),
        1e-4);
  }
}

TEST(SpectralScale, MultiVectorEstimateIsNeverBelowSingleVector) {
  auto spectrum = log_spaced_spectrum(6, 48, 1e3, 64);
  auto a = spectrum.matrices.to(at::kFloat);
  auto single = estimate_spectral_scale(a, SpectralScaleOptions().method(Scaling::PowerIteration));
  auto multi = estimate_spectral_scale(a, SpectralScaleOptions().method(Scaling::MultiPowerIteration));
  EXPECT_TRUE((multi >= single * (1 - 1e-6)).all().item<bool>());
}

// Multi-vector power iteration is robust to a start vector orthogonal to the top
// eigenvector (DASH §3.3). Here the top eigenvector e (λ₁ = 1) is made orthogonal
// to the single-vector iteration's start vector, and the rest of the spectrum is
// ≤ λ₂ = 0.3. Single-vector iteration then sees λ₂: float32 rounding gives it an e
// component of ~1e-7, which 10 steps grow by (λ₁/λ₂)^10 ≈ 2e5 only to ~0.02. Among
// 16 start vectors some have an e component from the start, and find λ₁.
TEST(SpectralScale, MultiVectorIterationFindsTheTopEigenvectorASingleStartVectorMisses) {
  const int64_t b = 32;
  auto generator = at::detail::createCPUGenerator(65);
  auto start = linalg::power_start_vectors(b, 1, at::TensorOptions(at::kDouble)).view({b});
  start = start / start.norm();
  auto top = at::randn({b}, generator, at::kDouble);
  top = top - top.dot(start) * start;
  top = top / top.norm();
  ASSERT_LT(std::abs(top.dot(start).item<double>()), 1e-12);
  // The bulk: a random SPD matrix with eigenvalues in [0.01, 0.3], restricted to e's complement.
  auto projector = at::eye(b, at::kDouble) - at::outer(top, top);
  auto bulk = testing::with_eigenvalues(at::linspace(0.3, 0.01, b, at::kDouble).unsqueeze(0), 66).matrices[0];
  auto a = (at::outer(top, top) + projector.mm(bulk).mm(projector)).to(at::kFloat);
  const auto margin = SpectralScaleOptions().margin();
  const auto single = estimate_spectral_scale(a, SpectralScaleOptions().method(Scaling::PowerIteration)).item<double>();
  const auto multi =
      estimate_spectral_scale(a, SpectralScaleOptions().method(Scaling::MultiPowerIteration)).item<double>();
  EXPECT_LT(single, 0.5 * margin) << "the single start vector should miss λ₁ = 1";
  EXPECT_GT(multi, 0.99 * margin);
  EXPECT_LT(multi, 1.0001 * margin);
}

}  // namespace
}  // namespace dash
