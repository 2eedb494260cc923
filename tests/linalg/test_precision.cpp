// Every method × scaling × matmul precision the spec defines, and the honesty of
// the diagnostics where 16-bit arithmetic breaks down.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

namespace dash {
namespace {

using testing::log_spaced_spectrum;
using testing::max_relative_error;
using testing::reference_inverse_root;

using Combination = std::tuple<RootMethod, Scaling, MatmulPrecision>;

class EveryCombination : public ::testing::TestWithParam<Combination> {};

// κ = 10, b = 64, N = 2, p ∈ {2, 4}, default steps/degree. Tolerances are a
// multiple of the matmul unit roundoff u16 (fp16 4.9e-4, bf16 3.9e-3): a Newton
// iteration's error settles near its rounding level times the conditioning of the
// iteration (≈ κ^{1/p}·√b·u16 ≲ 10·u16 here) — measured ≤ 3·u16 — so 20·u16 for
// fp16 and bf16. fp32 runs must meet the 10-step convergence bound 1e-3 (κ = 10
// converges fully; Chebyshev's interval is set to 1/(κ√b), below the scaled
// spectrum for every scaling, where degree 40 reaches ~(1 + 2√δ)^{-40} ≈ 4e-4).
TEST_P(EveryCombination, WithinTheToleranceOfItsPrecision) {
  auto [method, scaling, precision] = GetParam();
  auto spectrum = log_spaced_spectrum(2, 64, 10.0, 51);
  auto options = dash::testing::solver_options(method)
                     .precision(precision)
                     .epsilon(0.0)
                     .scaling(SpectralScaleOptions().method(scaling))
                     .chebyshev(ChebyshevOptions().interval_min(1.0 / (10.0 * 8.0) / 1.01));
  double tolerance = 1e-3;
  if (precision == MatmulPrecision::FP16) tolerance = 20 * 4.9e-4;
  if (precision == MatmulPrecision::BF16) tolerance = 20 * 3.9e-3;
  for (int64_t p : {2, 4}) {
    auto result = inverse_root_with_diagnostics(spectrum.matrices.to(at::kFloat), p, options);
    ASSERT_EQ(result.root.scalar_type(), at::kFloat);
    EXPECT_TRUE(result.finite.all().item<bool>());
    EXPECT_LE(max_relative_error(result.root, reference_inverse_root(spectrum, 0.0, p)), tolerance) << "p=" << p;
  }
}

// Where the solvers cannot succeed (κ = 1e6 at 10 steps, 16-bit NDB which the
// paper found unstable), the result may be poor but never silently so: any matrix
// whose root is off by more than 50% is flagged non-finite or has residual > 0.1.
TEST_P(EveryCombination, PoorResultsAreFlaggedByTheDiagnostics) {
  auto [method, scaling, precision] = GetParam();
  auto spectrum = log_spaced_spectrum(4, 64, 1e6, 52);
  auto options = dash::testing::solver_options(method).precision(precision).epsilon(0.0).scaling(
      SpectralScaleOptions().method(scaling));
  auto result = inverse_root_with_diagnostics(spectrum.matrices.to(at::kFloat), 4, options);
  auto errors = testing::relative_errors(result.root, reference_inverse_root(spectrum, 0.0, 4));
  auto poor = ~(errors <= 0.5);
  auto flagged = ~result.finite | ~(result.residual <= 0.1);
  EXPECT_TRUE((~poor | flagged).all().item<bool>()) << "errors " << errors << " residuals " << result.residual;
}

// 16-bit NewtonDB on ill-conditioned spectra: rounding Â to 16 bits turns
// its eigenvalues below ~u₁₆ negative, and the iteration used to amplify them until
// it overflowed (NaN/Inf at κ ≥ 1e4 for bf16). With the 16-bit regularisation floor
// it stays finite, and within a small factor of the larger of two independent
// limits: the error of the exact root of A rounded once to the 16-bit type (no
// 16-bit solver can beat it) and the error of the same NewtonDB in float32 (its ten
// steps do not converge the smallest eigenvalues at this κ).
TEST(SixteenBitNewtonDB, FiniteAndNearTheRoundingFloorOnIllConditionedSpectra) {
  const int64_t b = 64;
  for (double condition : {1e4, 1e6}) {
    auto log_spaced = at::pow(10.0, at::linspace(0.0, -std::log10(condition), b, at::kDouble));
    auto clusters = at::cat({at::ones({b / 2}, at::kDouble), at::full({b / 2}, 1.0 / condition, at::kDouble)});
    auto rank_deficient =
        at::cat({at::pow(10.0, at::linspace(0.0, -2.0, b / 4, at::kDouble)), at::zeros({b - b / 4}, at::kDouble)});
    int seed = 60;
    for (const auto& values : {log_spaced, clusters, rank_deficient}) {
      auto spectrum = testing::with_eigenvalues(values.expand({4, b}).contiguous(), seed++);
      const double epsilon = 1.0 / condition;
      const auto reference = reference_inverse_root(spectrum, epsilon, 4);
      auto options = dash::testing::solver_options(RootMethod::NewtonDB).epsilon(epsilon);
      const double fp32_error =
          max_relative_error(inverse_root(spectrum.matrices.to(at::kFloat), 4, options), reference);
      for (auto precision : {MatmulPrecision::BF16, MatmulPrecision::FP16}) {
        const auto type = precision == MatmulPrecision::BF16 ? at::kBFloat16 : at::kHalf;
        const double floor =
            max_relative_error(testing::eigh_inverse_root(spectrum.matrices.to(type), epsilon, 4), reference);
        auto root = inverse_root(spectrum.matrices.to(at::kFloat), 4, options.precision(precision));
        const auto where = "κ " + std::to_string(condition) + ", spectrum " + std::to_string(seed - 61) + ", " +
                           to_string(precision) + ": floor " + std::to_string(floor) + ", fp32 " +
                           std::to_string(fp32_error);
        ASSERT_TRUE(at::isfinite(root).all().item<bool>()) << where;
        const double error = max_relative_error(root, reference);
        EXPECT_LE(error, 2.5 * std::max(floor, fp32_error)) << where;
        EXPECT_LT(error, 1.0) << where;  // closer than a zero root, where both limits are near 1
      }
    }
  }
}

// The 16-bit paths beyond the table above: float64 input (the root comes back in
// float64), p = 1, 3 and 8, blocks of 5 (below LibTorch's CPU cut-off for small
// products, which reads the output buffer), one Newton step, and an early exit on
// the residual. κ = 10; the bound is 10·κ^{1/p}·√b·u₁₆, ten times the level where a
// 16-bit iteration's error settles (the table above measures ≤ 3·u₁₆ at p = 2, 4):
// loose, but a wrong dtype, a NaN or a lost constant is off by O(1).
TEST(SixteenBitPaths, EveryRootAndInputTypeWithinItsRoundingBound) {
  const double condition = 10.0;
  for (int64_t b : {5, 32}) {
    auto spectrum = log_spaced_spectrum(3, b, condition, 53);
    for (auto precision : {MatmulPrecision::BF16, MatmulPrecision::FP16}) {
      const double u16 = precision == MatmulPrecision::BF16 ? 3.9e-3 : 4.9e-4;
      for (auto method : kSolverMethods) {
        for (int64_t p : {1, 3, 8}) {
          if (method == RootMethod::NewtonDB && p == 3) continue;  // powers of two only
          const double bound = 10.0 * std::pow(condition, 1.0 / p) * std::sqrt(static_cast<double>(b)) * u16;
          const auto reference = reference_inverse_root(spectrum, 0.0, p);
          auto options = dash::testing::solver_options(method)
                             .precision(precision)
                             .epsilon(0.0)
                             .scaling(SpectralScaleOptions().method(Scaling::Frobenius))
                             .chebyshev(ChebyshevOptions().interval_min(1.0 / (condition * std::sqrt(b)) / 1.01));
          // Early exit at a residual 16-bit steps can reach (CN checks ‖M − I‖, NDB ‖W − I‖).
          auto early =
              InverseRootOptions(options).newton(NewtonOptions().steps(30).tolerance(4.0 * u16).check_interval(2));
          for (const auto& [name, variant] : {std::pair<std::string, InverseRootOptions>{"default", options},
                   std::pair<std::string, InverseRootOptions>{"early exit", early}}) {
            if (name == "early exit" && (method == RootMethod::Chebyshev || method == RootMethod::EVD)) continue;
            for (auto dtype : {at::kFloat, at::kDouble}) {
              const auto where = "b " + std::to_string(b) + ", " + to_string(precision) + ", " + to_string(method) +
                                 ", p " + std::to_string(p) + ", " + name + ", " + c10::toString(dtype);
              auto root = inverse_root(spectrum.matrices.to(dtype), p, variant);
              EXPECT_EQ(root.scalar_type(), dtype) << where;
              EXPECT_LE(max_relative_error(root, reference), bound) << where;
            }
          }
        }
      }
      // One Newton step: Z₁ = E₀ (NDB) and X₁ (CN) come back as they are.
      for (auto method : dash::testing::newton_solvers()) {
        auto one_step =
            dash::testing::solver_options(method).precision(precision).epsilon(0.0).newton(NewtonOptions().steps(1));
        auto root = inverse_root(spectrum.matrices.to(at::kDouble), 4, one_step);
        EXPECT_EQ(root.scalar_type(), at::kDouble) << to_string(method);
        EXPECT_TRUE(at::isfinite(root).all().item<bool>()) << to_string(method);
      }
    }
  }
}

std::string combination_name(const ::testing::TestParamInfo<Combination>& info) {
  auto [method, scaling, precision] = info.param;
  auto scaling_name = to_string(scaling);
  for (auto& c : scaling_name) c = c == '-' ? '_' : c;
  return to_string(method) + "_" + scaling_name + "_" + to_string(precision);
}

INSTANTIATE_TEST_SUITE_P(Iterative, EveryCombination,
    ::testing::Combine(::testing::ValuesIn(dash::testing::matmul_solvers()),
        ::testing::Values(Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration),
        ::testing::Values(MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16)),
    combination_name);

// EVD ignores the scaling (it needs no spectral bound); precision applies to its
// reconstruction matmul.
INSTANTIATE_TEST_SUITE_P(Evd, EveryCombination,
    ::testing::Combine(::testing::Values(RootMethod::EVD), ::testing::Values(Scaling::Frobenius),
        ::testing::Values(MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16)),
    combination_name);

}  // namespace
}  // namespace dash
