// Structured inputs: zero, identity, diagonal, rank-deficient, one outlier
// eigenvalue, and non-finite entries.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace dash {
namespace {

using testing::eigh_inverse_root;
using testing::max_relative_error;
using testing::reference_inverse_root;
using testing::with_eigenvalues;

class EveryMethod : public ::testing::TestWithParam<RootMethod> {
 protected:
  InverseRootOptions options() const { return dash::testing::solver_options(GetParam()); }
};

// (0 + εI)^{-1/p} = ε^{-1/p} I. Every method sees the scaled identity, whose
// normalised spectrum is a single point, so all are exact to rounding (1e-5).
TEST_P(EveryMethod, ZeroMatrixGivesScaledIdentity) {
  const double epsilon = 1e-6;
  auto zero = at::zeros({3, 8, 8});
  auto root = inverse_root(zero, 4, options().epsilon(epsilon));
  auto expected = at::eye(8).expand({3, 8, 8}) * std::pow(epsilon, -0.25);
  EXPECT_LE(max_relative_error(root, expected), 1e-5);
}

// With ε = 0 the zero matrix has no inverse root: the result must not be NaN
// (no 0/0 in the scaling) and the residual must say it failed.
TEST_P(EveryMethod, ZeroMatrixWithoutEpsilonIsFlaggedByTheResidual) {
  auto result = inverse_root_with_diagnostics(at::zeros({2, 4, 4}), 2, options().epsilon(0.0));
  EXPECT_TRUE((result.residual.isnan() | (result.residual > 0.5) | ~result.finite).all().item<bool>());
}

// The scaled identity's spectrum is the single point 1/margin; Chebyshev's fitted
// interval [0.4, 1] contains it, so every method is exact to rounding.
TEST_P(EveryMethod, IdentityGivesIdentity) {
  auto identity = at::eye(16).expand({2, 16, 16}).contiguous();
  for (int64_t p : {1, 2, 4}) {
    auto root = inverse_root(identity, p, options().epsilon(0.0).chebyshev(ChebyshevOptions().interval_min(0.4)));
    EXPECT_LE(max_relative_error(root, identity), 1e-5) << "p=" << p;
  }
}

// Diagonal matrices with entries in [1e-1, 1] (κ = 10): the root is the
// elementwise power. Newton methods converge fully in 10 steps at κ = 10 (floor
// ~1e-6); Chebyshev at degree 40 reaches ~1e-3 on this spectrum. Tolerance 1e-3,
// Chebyshev 1e-2.
TEST_P(EveryMethod, DiagonalMatrixGivesElementwisePower) {
  auto diagonal = at::linspace(0.1, 1.0, 12, at::kDouble).flip(0);
  auto a = at::diag_embed(diagonal).unsqueeze(0);
  auto expected = at::diag_embed(diagonal.pow(-0.25)).unsqueeze(0);
  auto root = inverse_root(a.to(at::kFloat), 4, options().epsilon(0.0));
  EXPECT_LE(max_relative_error(root, expected), GetParam() == RootMethod::Chebyshev ? 1e-2 : 1e-3);
}

// Rank b/2 with ε = 1e-3·λ_max: A + εI has κ ≈ 1e3. EVD is exact to the float32
// floor; Newton methods need log(2e3)/log(2.25) ≈ 9.4 steps plus polish, so they
// get 25 steps and the same floor. Chebyshev is not accurate at κ = 1e3 (its error
// decays like (1 + 2√δ)^{-d}) and is only checked for a finite, residual-honest result.
TEST_P(EveryMethod, RankDeficientWithRegularisation) {
  const int64_t b = 32;
  auto eigenvalues = at::cat({at::linspace(1.0, 0.1, b / 2, at::kDouble), at::zeros({b / 2}, at::kDouble)})
                         .expand({2, b})
                         .contiguous();
  auto spectrum = with_eigenvalues(eigenvalues, 11);
  const double epsilon = 1e-3;
  auto reference = reference_inverse_root(spectrum, epsilon, 4);
  auto result = inverse_root_with_diagnostics(
      spectrum.matrices.to(at::kFloat), 4, options().epsilon(epsilon).newton(NewtonOptions().steps(25)));
  ASSERT_TRUE(result.finite.all().item<bool>());
  if (GetParam() == RootMethod::Chebyshev) {
    EXPECT_GT(result.residual.min().item<double>(), 1e-2);
  } else {
    EXPECT_LE(max_relative_error(result.root, reference), testing::float32_floor(1.1e3, b, 4));
  }
}

// One eigenvalue 1e4 above a bulk at 1: Frobenius ≈ power iteration ≈ 1e4 here, and
// the bulk sits at 1e-4 of the scale: 25 Newton steps reach the floor.
TEST_P(EveryMethod, OneLargeOutlierEigenvalue) {
  if (GetParam() == RootMethod::Chebyshev) {
    GTEST_SKIP() << "Chebyshev is not meant for κ = 1e4 (see RankDeficientWithRegularisation)";
  }
  auto eigenvalues = at::ones({2, 24}, at::kDouble);
  eigenvalues.select(1, 0).fill_(1e4);
  auto spectrum = with_eigenvalues(eigenvalues, 12);
  auto root =
      inverse_root(spectrum.matrices.to(at::kFloat), 4, options().epsilon(0.0).newton(NewtonOptions().steps(25)));
  EXPECT_LE(max_relative_error(root, reference_inverse_root(spectrum, 0.0, 4)), testing::float32_floor(1e4, 24, 4));
}

// A NaN or Inf in one matrix poisons only that matrix: its root is NaN and flagged,
// the others are exactly what they are when solved without it.
TEST_P(EveryMethod, NonFiniteMatrixIsFlaggedAndIsolated) {
  auto spectrum = testing::log_spaced_spectrum(4, 8, 10.0, 13);
  auto input = spectrum.matrices.to(at::kFloat).clone();
  input[1][2][3] = std::numeric_limits<float>::quiet_NaN();
  input[3][0][0] = std::numeric_limits<float>::infinity();
  auto result = inverse_root_with_diagnostics(input, 4, options());
  auto expected_finite = at::tensor({1, 0, 1, 0}).to(at::kBool);
  EXPECT_TRUE(at::equal(result.finite, expected_finite)) << result.finite;
  EXPECT_TRUE(at::isnan(result.root[1]).all().item<bool>());
  EXPECT_TRUE(at::isnan(result.root[3]).all().item<bool>());
  auto clean = inverse_root(input.index_select(0, at::tensor({0, 2})), 4, options());
  EXPECT_LE(max_relative_error(result.root.index_select(0, at::tensor({0, 2})), clean), 1e-6);
}

// A rank-deficient factor near the top of the float32 range (λ_max = 1e36): ε/s
// is below the smallest float and vanished, so EVD inverted a zero eigenvalue and
// returned NaN. Every method must give a finite root. (No accuracy is asked for:
// float32 rounds the null space of such a matrix to eigenvalues of ±1e29, far
// above ε, so no float32 root resolves it.)
TEST_P(EveryMethod, HugeRankDeficientMatrixGivesAFiniteRoot) {
  const int64_t b = 16;
  auto eigenvalues = at::cat({at::linspace(1.0, 0.1, b / 2, at::kDouble), at::zeros({b / 2}, at::kDouble)})
                         .mul_(1e36)
                         .expand({2, b})
                         .contiguous();
  auto spectrum = with_eigenvalues(eigenvalues, 14);
  auto result = inverse_root_with_diagnostics(spectrum.matrices.to(at::kFloat), 4, options().epsilon(1e-10));
  EXPECT_TRUE(at::isfinite(result.root).all().item<bool>());
  EXPECT_TRUE(result.finite.all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Methods, EveryMethod,
    ::testing::Values(RootMethod::EVD, RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev),
    [](const auto& info) { return to_string(info.param); });

// EVD heuristics on an indefinite matrix (eigenvalues −0.5 … 1), ε = 1e-3,
// checked against float64 eigh with the heuristic applied by hand.
class EigenHeuristics : public ::testing::Test {
 protected:
  at::Tensor eigenvalues_ = at::tensor({1.0, 0.5, 0.2, -0.1, -0.5}, at::kDouble).unsqueeze(0);
  testing::KnownSpectrum spectrum_ = with_eigenvalues(eigenvalues_, 21);
  double epsilon_ = 1e-3;

  at::Tensor root(EigenHeuristic heuristic) {
    return inverse_root(spectrum_.matrices.to(at::kFloat), 2,
        dash::testing::solver_options(RootMethod::EVD).epsilon(epsilon_).eigen(EigenOptions().heuristic(heuristic)));
  }
  at::Tensor expected(const at::Tensor& weights) {
    return at::matmul(spectrum_.vectors * weights.unsqueeze(-2), spectrum_.vectors.transpose(-2, -1));
  }
};

// ε enters only through the heuristic (Distributed Shampoo's convention).
TEST_F(EigenHeuristics, ShampooShiftsTheSpectrumToPositive) {
  auto repaired = eigenvalues_ - eigenvalues_.min() + epsilon_;
  EXPECT_LE(max_relative_error(root(EigenHeuristic::Shampoo), expected(repaired.pow(-0.5))), 1e-5);
}

TEST_F(EigenHeuristics, AbsAndAbsAdd) {
  EXPECT_LE(max_relative_error(root(EigenHeuristic::Abs), expected(eigenvalues_.abs().pow(-0.5))), 1e-5);
  EXPECT_LE(
      max_relative_error(root(EigenHeuristic::AbsAdd), expected((eigenvalues_.abs() + epsilon_).pow(-0.5))), 1e-5);
}

TEST_F(EigenHeuristics, PseudoInverseDropsNonPositiveDirections) {
  auto weights =
      at::where(eigenvalues_ > epsilon_, eigenvalues_.clamp_min(epsilon_).pow(-0.5), at::zeros_like(eigenvalues_));
  EXPECT_LE(max_relative_error(root(EigenHeuristic::PseudoInverse), expected(weights)), 1e-5);
}

}  // namespace
}  // namespace dash
