// Accuracy of every solver against the float64 reference Q diag((λ+ε)^{-1/p}) Qᵀ,
// over block sizes, stack sizes, roots and condition numbers.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

namespace dash {
namespace {

using testing::float32_floor;
using testing::log_spaced_spectrum;
using testing::max_relative_error;
using testing::reference_inverse_root;

std::string case_name(const ::testing::TestParamInfo<std::tuple<RootMethod, int64_t, int64_t, int64_t, double>>& info) {
  auto [method, b, count, p, condition] = info.param;
  return to_string(method) + "_b" + std::to_string(b) + "_n" + std::to_string(count) + "_p" + std::to_string(p) +
         "_k1e" + std::to_string(static_cast<int>(std::log10(condition) + 0.5));
}

// Default options (10 steps, multi-vector power iteration, Chebyshev degree 40),
// fp32, κ ≤ 1e2, ε = 0 so the reference is the exact inverse root.
//
// Tolerances:
//  - EVD: the float32 floor κ·u·√b/p (support/spd_matrices.h) — nothing in fp32 can
//    do better, and an eigenvector or heuristic bug gives O(1) errors.
//  - CN, NDB: 1e-2. Ten steps take an eigenvalue 1/(2κ) of the scaled spectrum to 1
//    when (1+1/p)^p growth per step covers log(2κ) with a few steps left to polish;
//    for κ = 1e2 that holds with ~2 steps to spare (measured ≤ 5e-3, worst CN p = 1).
//  - Chebyshev, with its interval set to cover the scaled spectrum
//    (δ = 1/(2κ): power-iteration scaling puts λ_max near 1/2): interpolation error
//    ~ρ^{-d}, ρ = 1 + 2√δ, and x^{-1/p} is flatter for larger p; tolerance
//    4·ρ^{-d}/p + 1e-5 (κ = 1e2: 2.1e-2, 1.1e-2, 5.3e-3 for p = 1, 2, 4; measured
//    5.2e-3, 1.3e-3, 3.9e-4).
double chebyshev_interval_for(double condition) { return 1.0 / (2.0 * condition) / 1.01; }

class DefaultOptionsAccuracy
    : public ::testing::TestWithParam<std::tuple<RootMethod, int64_t, int64_t, int64_t, double>> {};

TEST_P(DefaultOptionsAccuracy, MatchesFloat64Reference) {
  auto [method, b, count, p, condition] = GetParam();
  auto spectrum = log_spaced_spectrum(count, b, condition, /*seed=*/1000 + b);
  auto options = dash::testing::solver_options(method).epsilon(0.0);
  double tolerance = 0.0;
  switch (method) {
    case RootMethod::EVD:
      tolerance = float32_floor(condition, b, p) + 1e-6;
      break;
    case RootMethod::CoupledNewton:
    case RootMethod::NewtonDB:
      tolerance = 1e-2;
      break;
    case RootMethod::Chebyshev: {
      const double delta = chebyshev_interval_for(condition);
      options.chebyshev().interval_min(delta);
      tolerance = 4.0 * std::pow(1.0 + 2.0 * std::sqrt(delta), -40.0) / static_cast<double>(p) + 1e-5;
      break;
    }
  }
  auto root = inverse_root(spectrum.matrices.to(at::kFloat), p, options);
  ASSERT_EQ(root.scalar_type(), at::kFloat);
  ASSERT_EQ(root.sizes(), spectrum.matrices.sizes());
  EXPECT_LE(max_relative_error(root, reference_inverse_root(spectrum, 0.0, p)), tolerance);
}

INSTANTIATE_TEST_SUITE_P(AllMethods, DefaultOptionsAccuracy,
    ::testing::Combine(::testing::ValuesIn(kSolverMethods), ::testing::Values(1, 2, 7, 64, 256),
        ::testing::Values(1, 5), ::testing::Values(1, 2, 4), ::testing::Values(1.0, 1e2)),
    case_name);

// Ill-conditioned: κ = 1e4 and 1e6.
//  - EVD in float64 input: error ≤ κ·1e-14 (float64 floor, u64 ≈ 1.1e-16 times √b/p
//    slack of 100).
//  - EVD in float32 at κ = 1e4: the float32 floor.
//  - CN and NDB at κ = 1e4 with 30 steps (enough by the log(2κ)/log(2.25) rule plus
//    polish): the float32 floor as well.
class IllConditioned : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(IllConditioned, EvdFloat64ReachesDoublePrecision) {
  auto [b, p] = GetParam();
  for (double condition : {1e4, 1e6}) {
    auto spectrum = log_spaced_spectrum(3, b, condition, 77);
    auto root = inverse_root(spectrum.matrices, p, dash::testing::solver_options(RootMethod::EVD).epsilon(0.0));
    ASSERT_EQ(root.scalar_type(), at::kDouble);
    EXPECT_LE(max_relative_error(root, reference_inverse_root(spectrum, 0.0, p)), condition * 1e-14)
        << "condition " << condition;
  }
}

TEST_P(IllConditioned, Float32SolversReachTheFloat32Floor) {
  auto [b, p] = GetParam();
  const double condition = 1e4;
  auto spectrum = log_spaced_spectrum(3, b, condition, 78);
  auto reference = reference_inverse_root(spectrum, 0.0, p);
  for (auto method : dash::testing::converging_solvers()) {
    auto options = dash::testing::solver_options(method).epsilon(0.0).newton(NewtonOptions().steps(30));
    auto root = inverse_root(spectrum.matrices.to(at::kFloat), p, options);
    EXPECT_LE(max_relative_error(root, reference), float32_floor(condition, b, p)) << to_string(method);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, IllConditioned, ::testing::Combine(::testing::Values(7, 64, 256), ::testing::Values(1, 2, 4)));

// Any positive p for EVD, CN and Chebyshev (NDB: powers of two only).
TEST(InverseRootAccuracy, OddRootsForEvdAndCoupledNewton) {
  auto spectrum = log_spaced_spectrum(2, 16, 10.0, 5);
  for (int64_t p : {3, 5, 6}) {
    auto reference = reference_inverse_root(spectrum, 0.0, p);
    auto input = spectrum.matrices.to(at::kFloat);
    EXPECT_LE(max_relative_error(
                  inverse_root(input, p, dash::testing::solver_options(RootMethod::EVD).epsilon(0)), reference),
        1e-5)
        << "EVD p=" << p;
    EXPECT_LE(
        max_relative_error(
            inverse_root(input, p, dash::testing::solver_options(RootMethod::CoupledNewton).epsilon(0)), reference),
        1e-4)
        << "CN p=" << p;
  }
}

TEST(InverseRootAccuracy, NewtonDBEighthRootChainsThreePasses) {
  auto spectrum = log_spaced_spectrum(2, 32, 1e2, 6);
  auto root =
      inverse_root(spectrum.matrices.to(at::kFloat), 8, dash::testing::solver_options(RootMethod::NewtonDB).epsilon(0));
  EXPECT_LE(max_relative_error(root, reference_inverse_root(spectrum, 0.0, 8)), 1e-4);
}

// ε regularises: the root is that of A + εI.
TEST(InverseRootAccuracy, EpsilonIsAddedToTheMatrix) {
  auto spectrum = log_spaced_spectrum(2, 16, 1e2, 8, /*top=*/1e-2);
  const double epsilon = 1e-3;
  auto reference = reference_inverse_root(spectrum, epsilon, 4);
  for (auto method : kSolverMethods) {
    auto root = inverse_root(spectrum.matrices.to(at::kFloat), 4,
        dash::testing::solver_options(method).epsilon(epsilon).chebyshev(
            ChebyshevOptions().interval_min(chebyshev_interval_for(10.0))));
    EXPECT_LE(max_relative_error(root, reference), 1e-3) << to_string(method);
  }
}

// relative_epsilon ridges by the largest eigenvalue: the root is that of
// A + ε_rel·λ_max·I whatever A's scale (here λ_max = 1e-6 and 1e3, κ = 1e6), so
// the root's condition number is at most ε_rel^{-1/4}. EVD takes λ_max from its
// eigenvalues; the iterative solvers from power iteration, which on this spectrum
// (top gap 1.56×) converges to well within the tolerance.
TEST(InverseRootAccuracy, RelativeEpsilonRidgesByTheLargestEigenvalue) {
  const double relative = 1e-3;
  for (double top : {1e-6, 1e3}) {
    auto spectrum = log_spaced_spectrum(2, 32, 1e6, 9, top);
    const auto reference = reference_inverse_root(spectrum, relative * top, 4);
    for (auto method : dash::testing::converging_solvers()) {
      auto options = dash::testing::solver_options(method).epsilon(0.0).relative_epsilon(relative);
      options.newton().steps(20);
      auto root = inverse_root(spectrum.matrices.to(at::kFloat), 4, options);
      EXPECT_LE(max_relative_error(root, reference), method == RootMethod::EVD ? 1e-4 : 1e-3)
          << to_string(method) << ", top " << top;
    }
  }
}

// A ridge lifts the top of the normalised spectrum too: with Frobenius scaling a
// rank-1 factor's λ_max is ‖A‖_F = s, so (A + 0.5 λ_max I)/s would reach 1.5, where
// Chebyshev (fitted on [δ, 1]) would extrapolate. The scale grows with the ridge.
TEST(InverseRootAccuracy, RelativeEpsilonKeepsTheNormalisedSpectrumInRange) {
  auto eigenvalues = at::zeros({2, 16}, at::kDouble);
  eigenvalues.select(1, 0).fill_(3.0);
  auto spectrum = testing::with_eigenvalues(eigenvalues, 10);
  const double relative = 0.5;
  const auto reference = reference_inverse_root(spectrum, relative * 3.0, 4);
  for (auto method : dash::testing::matmul_solvers()) {
    auto options = dash::testing::solver_options(method).epsilon(0.0).relative_epsilon(relative);
    options.scaling().method(Scaling::Frobenius);
    EXPECT_LE(max_relative_error(inverse_root(spectrum.matrices.to(at::kFloat), 4, options), reference), 1e-4)
        << to_string(method);
  }
}

}  // namespace
}  // namespace dash
