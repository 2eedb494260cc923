// Bad input gets an error that names the problem.

#include <dash/inverse_root.h>

#include <ATen/ATen.h>

#include "support/error_message.h"

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
  EXPECT_THAT(error_of([] { inverse_root(kGood, 0); }), HasSubstr("positive integer"));
  EXPECT_THAT(error_of([] { inverse_root(kGood, -4); }), HasSubstr("positive integer"));
  EXPECT_THAT(error_of([] { inverse_root(kGood, 3, InverseRootOptions().method(RootMethod::NewtonDB)); }),
      HasSubstr("power of two"));
  EXPECT_THAT(error_of([] { inverse_root(kGood, 6, InverseRootOptions().method(RootMethod::NewtonDB)); }),
      HasSubstr("power of two"));
}

TEST(InputValidation, RejectsBadOptions) {
  auto with = [](InverseRootOptions options) { return error_of([&] { inverse_root(kGood, 4, options); }); };
  EXPECT_THAT(with(InverseRootOptions().epsilon(-1e-8)), HasSubstr("epsilon"));
  EXPECT_THAT(with(InverseRootOptions().newton_steps(0)), HasSubstr("newton_steps"));
  EXPECT_THAT(with(InverseRootOptions().power_iterations(0)), HasSubstr("power_iterations"));
  EXPECT_THAT(with(InverseRootOptions().power_vectors(0)), HasSubstr("power_vectors"));
  EXPECT_THAT(with(InverseRootOptions().power_vectors(33)), HasSubstr("power_vectors"));
  EXPECT_THAT(with(InverseRootOptions().power_margin(0.5)), HasSubstr("power_margin"));
  EXPECT_THAT(with(InverseRootOptions().tolerance(-1.0)), HasSubstr("tolerance"));
  EXPECT_THAT(with(InverseRootOptions().tolerance_check_interval(0)), HasSubstr("tolerance_check_interval"));
  EXPECT_THAT(with(InverseRootOptions().chebyshev_degree(0)), HasSubstr("chebyshev_degree"));
  EXPECT_THAT(with(InverseRootOptions().chebyshev_interval_min(1.0)), HasSubstr("chebyshev_interval_min"));
}

TEST(InputValidation, DiagnosticsAndScaleCheckTheirInputsToo) {
  EXPECT_THAT(error_of([] { inverse_root_with_diagnostics(at::ones({2, 3}), 2); }), HasSubstr("square"));
  EXPECT_THAT(error_of([] { estimate_spectral_scale(at::ones({1, 2, 3, 3})); }), HasSubstr("dimensions"));
}

}  // namespace
}  // namespace dash
