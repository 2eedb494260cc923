// Bad input gets an error that names the problem.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include <ATen/ATen.h>

#include "support/error_message.h"
#include "support/solver_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dash {
namespace {

using ::testing::HasSubstr;

using testing::error_of;

const at::Tensor kGood = at::eye(4).expand({2, 4, 4}).contiguous();

TEST(InputValidation, RejectsWrongShapes) {
  EXPECT_THAT(error_of([] { inverse_root(at::ones({4}), 2); }), HasSubstr("dimensions"));
  EXPECT_THAT(error_of([] { inverse_root(at::ones({2, 2, 4, 4}), 2); }), HasSubstr("dimensions"));
  EXPECT_THAT(error_of([] { inverse_root(at::ones({2, 4, 3}), 2); }), HasSubstr("square"));
  EXPECT_THAT(error_of([] { inverse_root(at::ones({4, 3}), 2); }), HasSubstr("square"));
}

TEST(InputValidation, RejectsNonFloatingPoint) {
  EXPECT_THAT(error_of([] { inverse_root(at::ones({4, 4}, at::kLong), 2); }), HasSubstr("floating-point"));
  EXPECT_THAT(error_of([] { inverse_root(at::ones({4, 4}, at::kBool), 2); }), HasSubstr("floating-point"));
  EXPECT_THAT(error_of([] { inverse_root(at::ones({4, 4}, at::kComplexFloat), 2); }), HasSubstr("floating-point"));
  EXPECT_THAT(error_of([] { inverse_root(at::Tensor(), 2); }), HasSubstr("undefined"));
}

TEST(InputValidation, RejectsBadRoots) {
  for (int64_t p : {int64_t{0}, int64_t{-4}, int64_t{65}, int64_t{1000000000}}) {
    // 1e9 used to spend minutes on the diagnostics' X^p, one product at a time.
    EXPECT_THAT(error_of([&] { inverse_root_with_diagnostics(kGood, p); }), HasSubstr("an integer in [1, 64]")) << p;
  }
  EXPECT_THAT(error_of([] { inverse_root(kGood, 3, dash::testing::solver_options(RootMethod::NewtonDB)); }),
      HasSubstr("power of two"));
  EXPECT_THAT(error_of([] { inverse_root(kGood, 6, dash::testing::solver_options(RootMethod::NewtonDB)); }),
      HasSubstr("power of two"));
}

// Matrices no root method can take are flagged (a NaN root, finite = false), on
// the device, not returned as roots: a non-symmetric one for every method, a
// negative definite one for the matmul-only solvers (EVD's heuristics are meant
// for indefinite input). The admissible matrix in the same stack is unaffected.
TEST(InputValidation, FlagsMatricesNoSolverCanTake) {
  auto spd = at::eye(6) * 2.0 + at::full({6, 6}, 0.1);
  auto asymmetric = spd.clone();
  asymmetric[0][5] = 1.0;
  auto stack = at::stack({spd, asymmetric, -spd});
  for (auto method : kSolverMethods) {
    auto result = inverse_root_with_diagnostics(stack, 4, dash::testing::solver_options(method));
    const bool evd = method == RootMethod::EVD;
    EXPECT_TRUE(result.finite[0].item<bool>()) << to_string(method);
    EXPECT_LE(result.residual[0].item<double>(), 1e-3) << to_string(method);
    EXPECT_FALSE(result.finite[1].item<bool>()) << to_string(method);
    EXPECT_TRUE(at::isnan(result.root[1]).all().item<bool>()) << to_string(method);
    EXPECT_EQ(result.finite[2].item<bool>(), evd) << to_string(method);
  }
}

TEST(InputValidation, RejectsBadOptions) {
  auto with = [](InverseRootOptions options) { return error_of([&] { inverse_root(kGood, 4, options); }); };
  EXPECT_THAT(with(InverseRootOptions().epsilon(-1e-8)), HasSubstr("epsilon"));
  EXPECT_THAT(with(InverseRootOptions().newton(NewtonOptions().steps(0))), HasSubstr("newton_steps"));
  EXPECT_THAT(with(InverseRootOptions().scaling(SpectralScaleOptions().iterations(0))), HasSubstr("power_iterations"));
  EXPECT_THAT(with(InverseRootOptions().scaling(SpectralScaleOptions().vectors(0))), HasSubstr("power_vectors"));
  EXPECT_THAT(with(InverseRootOptions().scaling(SpectralScaleOptions().vectors(33))), HasSubstr("power_vectors"));
  EXPECT_THAT(with(InverseRootOptions().scaling(SpectralScaleOptions().margin(0.5))), HasSubstr("power_margin"));
  EXPECT_THAT(with(InverseRootOptions().newton(NewtonOptions().tolerance(-1.0))), HasSubstr("tolerance"));
  EXPECT_THAT(
      with(InverseRootOptions().newton(NewtonOptions().check_interval(0))), HasSubstr("tolerance_check_interval"));
  EXPECT_THAT(with(InverseRootOptions().chebyshev(ChebyshevOptions().degree(0))), HasSubstr("chebyshev_degree"));
  EXPECT_THAT(
      with(InverseRootOptions().chebyshev(ChebyshevOptions().interval_min(1.0))), HasSubstr("chebyshev_interval_min"));
  // Above FLT_MAX, ε is no float32 number ("value cannot be converted", naming nothing).
  EXPECT_THAT(with(InverseRootOptions().epsilon(1e39)), HasSubstr("epsilon"));
  EXPECT_NO_THROW(inverse_root(kGood, 4, InverseRootOptions().epsilon(1e38)));
  // Iteration counts are capped: a mistyped 10⁷ would run for hours, not fail.
  EXPECT_THAT(with(InverseRootOptions().newton(NewtonOptions().steps(1001))), HasSubstr("newton_steps"));
  EXPECT_THAT(with(InverseRootOptions().chebyshev(ChebyshevOptions().degree(1001))), HasSubstr("chebyshev_degree"));
  EXPECT_THAT(
      with(InverseRootOptions().scaling(SpectralScaleOptions().iterations(1001))), HasSubstr("power_iterations"));
}

// Each solver's struct is checked on its own, and its message names the option both
// ways: the flat name of dash.Dash and checkpoints, and the C++ path.
TEST(InputValidation, EachSolverStructChecksItsOwnFields) {
  auto error_for = [](const auto& options) { return error_of([&] { check_solver_options(options); }); };
  EXPECT_THAT(
      error_for(EigenOptions().warm_iterations(101)), HasSubstr("eigen_warm_iterations (eigen.warm_iterations)"));
  EXPECT_THAT(error_for(NewtonOptions().steps(0)), HasSubstr("newton_steps (newton.steps)"));
  EXPECT_THAT(
      error_for(NewtonDBOptions().interval_min(0.0)), HasSubstr("minimax_interval_min (newton_db.interval_min)"));
  EXPECT_THAT(error_for(ChebyshevOptions().degree(0)), HasSubstr("chebyshev_degree (chebyshev.degree)"));
  EXPECT_THAT(error_for(SpectralScaleOptions().margin(0.5)), HasSubstr("power_margin (scaling.margin)"));
  EXPECT_NO_THROW(check_solver_options(EigenOptions()));
  EXPECT_NO_THROW(check_solver_options(NewtonOptions()));
  EXPECT_NO_THROW(check_solver_options(NewtonDBOptions()));
  EXPECT_NO_THROW(check_solver_options(ChebyshevOptions()));
  EXPECT_NO_THROW(check_solver_options(SpectralScaleOptions()));
  // estimate_spectral_scale() takes only the scaling struct, and checks it.
  EXPECT_THAT(error_of([] { estimate_spectral_scale(kGood, SpectralScaleOptions().vectors(0)); }),
      HasSubstr("power_vectors (scaling.vectors)"));
}

TEST(InputValidation, DiagnosticsAndScaleCheckTheirInputsToo) {
  EXPECT_THAT(error_of([] { inverse_root_with_diagnostics(at::ones({2, 3}), 2); }), HasSubstr("square"));
  EXPECT_THAT(error_of([] { estimate_spectral_scale(at::ones({1, 2, 3, 3})); }), HasSubstr("dimensions"));
}

}  // namespace
}  // namespace dash
