// RootMethod::Auto's comparison (choose_root_method): the choice follows from the
// trials it reports, and each trial's error is the gradient-weighted root error,
// recomputed here from the known spectrum instead of eigh.

#include <dash/inverse_root.h>
#include <dash/root_method_choice.h>

#include "support/error_message.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dash {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// Q diag(√λ) Qᵀ: the weight the errors are measured with, from the construction.
at::Tensor square_root(const testing::KnownSpectrum& spectrum) {
  return at::matmul(
      spectrum.vectors * spectrum.eigenvalues.clamp_min(0.0).sqrt().unsqueeze(-2), spectrum.vectors.transpose(1, 2));
}

double weighted_error(const at::Tensor& root, const at::Tensor& reference, const at::Tensor& weight) {
  auto difference = at::linalg_vector_norm(at::matmul(root.to(at::kDouble) - reference, weight), 2, {1, 2});
  return (difference / at::linalg_vector_norm(at::matmul(reference, weight), 2, {1, 2})).max().item<double>();
}

const RootMethodTrial& trial_of(const RootMethodChoice& choice, RootMethod method) {
  for (const auto& trial : choice.trials) {
    if (trial.method == method) return trial;
  }
  throw std::runtime_error("no trial of this method");
}

// The chosen method meets the accuracy and is the most accurate of those within
// 10 % of the fastest time among the methods that meet it.
TEST(ChooseRootMethod, TakesTheFastestMethodWithinTheAccuracy) {
  auto spectrum = testing::log_spaced_spectrum(6, 48, 1e3, /*seed=*/11);
  auto options = InverseRootOptions().epsilon(1e-8).auto_max_error(0.05);
  InverseRootWorkspace workspace;
  auto choice = choose_root_method(spectrum.matrices.to(at::kFloat), 4, options, workspace);
  ASSERT_EQ(choice.trials.size(), 4u);
  EXPECT_EQ(choice.trials[0].method, RootMethod::EVD);
  EXPECT_EQ(choice.trials[1].method, RootMethod::CoupledNewton);
  EXPECT_EQ(choice.trials[2].method, RootMethod::NewtonDB);
  EXPECT_EQ(choice.trials[3].method, RootMethod::Chebyshev);
  EXPECT_LT(trial_of(choice, RootMethod::EVD).error, 1e-4) << "fp32 EVD at condition 1e3";
  const auto& chosen = trial_of(choice, choice.method);
  EXPECT_TRUE(chosen.meets_accuracy);
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& trial : choice.trials) {
    EXPECT_EQ(trial.meets_accuracy, trial.error <= 0.05) << static_cast<int>(trial.method);
    EXPECT_GT(trial.milliseconds, 0.0);
    if (trial.meets_accuracy) fastest = std::min(fastest, trial.milliseconds);
  }
  EXPECT_LE(chosen.milliseconds, 1.1 * fastest);
  for (const auto& trial : choice.trials) {
    if (trial.meets_accuracy && trial.milliseconds <= 1.1 * fastest) {
      EXPECT_LE(chosen.error, trial.error) << static_cast<int>(trial.method);
    }
  }
}

// Each trial's error is max_i ‖(X_i − X*_i) A_i^{1/2}‖_F / ‖X*_i A_i^{1/2}‖_F.
// Three coupled Newton steps leave an error of a few tenths to check it on.
TEST(ChooseRootMethod, ErrorIsTheRootErrorOnGradientsDistributedLikeTheMatrix) {
  auto spectrum = testing::log_spaced_spectrum(5, 32, 1e3, /*seed=*/12);
  const double epsilon = 1e-6;
  auto options = InverseRootOptions().epsilon(epsilon).newton(NewtonOptions().steps(3));
  auto matrices = spectrum.matrices.to(at::kFloat);
  InverseRootWorkspace workspace;
  auto choice = choose_root_method(matrices, 4, options, workspace);
  const auto expected =
      weighted_error(inverse_root(matrices, 4, InverseRootOptions(options).method(RootMethod::CoupledNewton)),
          testing::reference_inverse_root(spectrum, epsilon, 4), square_root(spectrum));
  ASSERT_GT(expected, 1e-2) << "the test needs an inexact root";
  // The float32 rounding of the input moves the exact root by ~1e-5 relative.
  EXPECT_NEAR(trial_of(choice, RootMethod::CoupledNewton).error, expected, 1e-3 * expected);
}

// A rank-deficient factor (as in training): its null directions dominate the plain
// relative error even of float32 EVD, but no gradient visits them.
TEST(ChooseRootMethod, DirectionsWithoutEnergyDoNotCount) {
  auto eigenvalues = at::cat({at::logspace(0.0, -2.0, 16, 10.0, at::kDouble), at::zeros({16}, at::kDouble)})
                         .unsqueeze(0)
                         .repeat({3, 1});
  auto spectrum = testing::with_eigenvalues(eigenvalues, /*seed=*/13);
  auto options = dash::testing::solver_options(RootMethod::EVD).epsilon(1e-10);
  auto matrices = spectrum.matrices.to(at::kFloat);
  InverseRootWorkspace workspace;
  auto choice = choose_root_method(matrices, 4, options, workspace);
  auto evd_root = inverse_root(matrices, 4, options);
  const auto reference = testing::reference_inverse_root(spectrum, 1e-10, 4);
  ASSERT_GT(testing::max_relative_error(evd_root, reference), 0.1) << "the plain error is large";
  EXPECT_LT(trial_of(choice, RootMethod::EVD).error, 1e-3);
  EXPECT_NEAR(
      trial_of(choice, RootMethod::EVD).error, weighted_error(evd_root, reference, square_root(spectrum)), 1e-4);
}

// With relative_epsilon the target is the ridged root (A + ε_rel·λ_max·I)^{-1/p}:
// EVD computes exactly that, so its error is float32 rounding, not the distance to
// the unridged root (which is large here: a third of the spectrum lies below the ridge).
TEST(ChooseRootMethod, ErrorIsMeasuredAgainstTheRootWithItsRelativeRidge) {
  auto spectrum = testing::log_spaced_spectrum(3, 32, 1e6, 13);
  const double relative = 1e-2;
  InverseRootWorkspace workspace;
  auto options = InverseRootOptions().epsilon(0.0).relative_epsilon(relative);
  auto choice = choose_root_method(spectrum.matrices.to(at::kFloat), 4, options, workspace);
  const auto& evd = trial_of(choice, RootMethod::EVD);
  const auto ridged = testing::reference_inverse_root(spectrum, relative * 1.0, 4);  // λ_max = 1
  const auto unridged = testing::reference_inverse_root(spectrum, 0.0, 4);
  EXPECT_GT(weighted_error(ridged, unridged, square_root(spectrum)), 0.1);  // the two targets differ
  EXPECT_LE(evd.error, 1e-4);
}

TEST(ChooseRootMethod, WithoutAnAccurateEnoughMethodTakesTheMostAccurate) {
  auto spectrum = testing::log_spaced_spectrum(4, 32, 1e2, /*seed=*/14);
  InverseRootWorkspace workspace;
  auto choice =
      choose_root_method(spectrum.matrices.to(at::kFloat), 2, InverseRootOptions().auto_max_error(1e-15), workspace);
  double smallest = std::numeric_limits<double>::infinity();
  for (const auto& trial : choice.trials) {
    EXPECT_FALSE(trial.meets_accuracy);
    smallest = std::min(smallest, trial.error);
  }
  EXPECT_EQ(trial_of(choice, choice.method).error, smallest);
}

TEST(ChooseRootMethod, NewtonDBSitsOutRootsItCannotCompute) {
  auto spectrum = testing::log_spaced_spectrum(3, 16, 1e2, /*seed=*/15);
  InverseRootWorkspace workspace;
  auto choice = choose_root_method(spectrum.matrices.to(at::kFloat), 3, InverseRootOptions(), workspace);
  const auto& newton_db = trial_of(choice, RootMethod::NewtonDB);
  EXPECT_TRUE(std::isnan(newton_db.milliseconds));
  EXPECT_TRUE(std::isinf(newton_db.error));
  EXPECT_FALSE(newton_db.meets_accuracy);
  EXPECT_NE(choice.method, RootMethod::NewtonDB);
}

TEST(ChooseRootMethod, RejectsStacksWithoutAFiniteMatrixAndInverseRootRejectsAuto) {
  InverseRootWorkspace workspace;
  auto nan_stack = at::full({2, 8, 8}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_THAT(error_of([&] { choose_root_method(nan_stack, 4, InverseRootOptions(), workspace); }),
      HasSubstr("no matrix of the stack is finite"));
  EXPECT_THAT(
      error_of([&] { inverse_root(at::eye(8).unsqueeze(0), 4, dash::testing::solver_options(RootMethod::Auto)); }),
      HasSubstr("RootMethod::Auto is chosen per stack"));
  EXPECT_THAT(error_of([&] { check_inverse_root_options(4, InverseRootOptions().auto_max_error(0.0)); }),
      HasSubstr("auto_max_error must be > 0"));
}

}  // namespace
}  // namespace dash
