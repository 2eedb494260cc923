// Structured inputs: zero, identity, diagonal, rank-deficient, tiny, one outlier
// eigenvalue, and non-finite entries; the diagnostics' residual on them.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

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

INSTANTIATE_TEST_SUITE_P(
    Methods, EveryMethod, ::testing::ValuesIn(kSolverMethods), [](const auto& info) { return to_string(info.param); });

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

// inverse_root_with_diagnostics() reports ‖X^p (A + ε_eff I) − I‖_F / √b with
// ε_eff = max(ε, ε_rel·λ_max), the matrix the root was asked for, for every method
// and precision. EVD (ε acts on its eigenvalues) and NewtonDB by eigh (ε_rel acts
// on its eigenvalues) once measured against A or A + εI instead: 0.79 = √(5/8) for
// the rank-3 8 × 8 matrix below, ≈ 1 for tiny matrices under a larger ε.
struct ResidualCase {
  RootMethod method;
  NewtonDBEvaluation evaluation;
  MatmulPrecision precision;
};

class DiagnosticsResidual : public ::testing::TestWithParam<ResidualCase> {
 protected:
  InverseRootOptions options(double epsilon, double relative_epsilon = 0.0) const {
    const auto& param = GetParam();
    return dash::testing::with_evaluation(InverseRootOptions().method(param.method), param.evaluation)
        .precision(param.precision)
        .epsilon(epsilon)
        .relative_epsilon(relative_epsilon)
        .newton(NewtonOptions().steps(25));
  }
  // Float32 and not Chebyshev (its error at κ = 1e3 is ~1e-1): the root is accurate.
  bool resolves_kappa_1e3() const {
    return GetParam().precision == MatmulPrecision::FP32 && GetParam().method != RootMethod::Chebyshev;
  }
};

// ‖X^p (A + ε_eff I) − I‖_F / √b in float64 from the returned root and the input
// as passed; `ridge` is ε_eff per matrix, (N,).
at::Tensor reference_residual(const at::Tensor& root, const at::Tensor& input, const at::Tensor& ridge, int64_t p) {
  const auto b = input.size(-1);
  auto identity = at::eye(b, at::TensorOptions().dtype(at::kDouble));
  auto regularised = input.to(at::kDouble) + ridge.to(at::kDouble).view({-1, 1, 1}) * identity;
  auto product = at::matmul(at::linalg_matrix_power(root.to(at::kDouble), p), regularised);
  return at::linalg_vector_norm(product - identity, 2, {1, 2}) / std::sqrt(static_cast<double>(b));
}

// Eigenvalues 1, 0.5, 0.2 and five zeros, times `top`.
at::Tensor rank_three(double top) {
  auto eigenvalues = at::cat({at::tensor({1.0, 0.5, 0.2}, at::kDouble), at::zeros({5}, at::kDouble)}).mul_(top);
  return with_eigenvalues(eigenvalues.expand({2, 8}).contiguous(), 31).matrices.to(at::kFloat);
}

// The reported residual (float32, in normalised units) agrees with the float64 one
// to 1% plus `absolute`, the float32 rounding of X^p Â: about 2κu, 1e-4 at
// κ(A + ε_eff I) = 1e3, and a few u·√b, 1e-6, at κ ≈ 1. A root that failed outright
// (16-bit CN diverges at κ = 1e3) need only be reported as failed: a residual
// ≥ 0.5 or NaN where the float64 one is ≥ 1 or NaN.
void expect_reported(const at::Tensor& reported, const at::Tensor& reference, double absolute) {
  auto rep = reported.to(at::kDouble);
  auto agrees = (rep - reference).abs() <= reference * 1e-2 + absolute;
  auto failed = ~(reference < 1.0) & ~(rep < 0.5);
  EXPECT_TRUE((agrees | failed).all().item<bool>()) << "reported " << reported << " float64 " << reference;
}

TEST_P(DiagnosticsResidual, RankThreeWithEpsilonIsMeasuredAgainstAPlusEpsilon) {
  auto a = rank_three(1.0);
  const double epsilon = 1e-3;
  auto result = inverse_root_with_diagnostics(a, 4, options(epsilon));
  auto reference = reference_residual(result.root, a, at::full({2}, epsilon, at::kDouble), 4);
  expect_reported(result.residual, reference, 1e-4);
  if (resolves_kappa_1e3()) EXPECT_LE(result.residual.max().item<double>(), 5e-3);
}

// Tiny factors: ε scaled with them (κ = 1e3), and the default ε = 1e-10 far above
// them (A + εI ≈ εI, whose root every method gets right).
TEST_P(DiagnosticsResidual, TinyMatricesAreMeasuredAgainstAPlusEpsilon) {
  for (double top : {1e-12, 1e-30}) {
    auto a = rank_three(top);
    auto scaled = inverse_root_with_diagnostics(a, 4, options(1e-3 * top));
    expect_reported(
        scaled.residual, reference_residual(scaled.root, a, at::full({2}, 1e-3 * top, at::kDouble), 4), 1e-4);
    if (resolves_kappa_1e3()) EXPECT_LE(scaled.residual.max().item<double>(), 5e-3) << "top " << top;

    auto dominated = inverse_root_with_diagnostics(a, 4, options(1e-10));
    expect_reported(
        dominated.residual, reference_residual(dominated.root, a, at::full({2}, 1e-10, at::kDouble), 4), 1e-6);
    if (GetParam().precision == MatmulPrecision::FP32) {
      EXPECT_LE(dominated.residual.max().item<double>(), 1e-4) << "top " << top;
    }
  }
}

// With ε_rel > 0 the root is that of A + max(ε, ε_rel·λ_max)·I (root_options.h):
// λ_max is the largest eigenvalue for EVD and for NewtonDB by eigh (of A + εI,
// ε ≪ λ_max here), and s / margin for the iterative solvers (s as they estimate it).
TEST_P(DiagnosticsResidual, RelativeEpsilonIsInTheMatrix) {
  auto a = rank_three(5.0);
  const double epsilon = 1e-10;
  const double relative_epsilon = 1e-3;
  const auto opts = options(epsilon, relative_epsilon);
  const bool from_eigenvalues =
      opts.method() == RootMethod::EVD ||
      (opts.method() == RootMethod::NewtonDB && opts.newton_db().evaluation() == NewtonDBEvaluation::Eigh);
  at::Tensor top;
  if (from_eigenvalues) {
    top = std::get<0>(at::linalg_eigvalsh(a.to(at::kDouble)).max(-1));
  } else {
    auto shifted = a + epsilon * at::eye(8, a.options());
    top = estimate_spectral_scale(shifted, opts.scaling(), opts.precision()).view({-1}).to(at::kDouble) /
          opts.scaling().margin();
  }
  auto ridge = (top * relative_epsilon).clamp_min(epsilon);
  auto result = inverse_root_with_diagnostics(a, 4, opts);
  expect_reported(result.residual, reference_residual(result.root, a, ridge, 4), 1e-4);
  if (resolves_kappa_1e3()) EXPECT_LE(result.residual.max().item<double>(), 5e-3);
}

std::vector<ResidualCase> residual_cases() {
  std::vector<ResidualCase> cases;
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16, MatmulPrecision::FP16}) {
    cases.push_back({RootMethod::EVD, NewtonDBEvaluation::Matmuls, precision});
    cases.push_back({RootMethod::CoupledNewton, NewtonDBEvaluation::Matmuls, precision});
    cases.push_back({RootMethod::NewtonDB, NewtonDBEvaluation::Matmuls, precision});
    cases.push_back({RootMethod::NewtonDB, NewtonDBEvaluation::Eigh, precision});
    cases.push_back({RootMethod::Chebyshev, NewtonDBEvaluation::Matmuls, precision});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    MethodsAndPrecisions, DiagnosticsResidual, ::testing::ValuesIn(residual_cases()), [](const auto& info) {
      const auto& param = info.param;
      auto name = to_string(param.method);
      if (param.method == RootMethod::NewtonDB) name += "_" + to_string(param.evaluation);
      return name + "_" + to_string(param.precision);
    });

}  // namespace
}  // namespace dash
