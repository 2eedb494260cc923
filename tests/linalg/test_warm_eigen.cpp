// The warm-started eigendecomposition (InverseRootOptions::eigen_refresh_tolerance):
// against float64 eigh roots, on perturbed and on EMA factor sequences, and its
// τ = 0 / stale-basis paths against plain EVD, bit for bit.

#include <dash/inverse_root.h>

#include "support/error_message.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/ATen.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

namespace dash {
namespace {

using testing::eigh_inverse_root;
using ::testing::HasSubstr;
using testing::max_relative_error;

InverseRootOptions warm_evd(double tolerance, int64_t iterations = 1) {
  return dash::testing::solver_options(RootMethod::EVD)
      .epsilon(0.0)
      .eigen(EigenOptions().refresh_tolerance(tolerance).warm_iterations(iterations));
}

// A symmetric perturbation with ‖E_i‖_F = size · ‖A_i‖_F.
at::Tensor perturbed(const at::Tensor& a, double size, uint64_t seed) {
  auto noise = at::randn(a.sizes(), at::detail::createCPUGenerator(seed), at::kDouble);
  noise = noise + noise.transpose(1, 2);
  auto scale = a.flatten(1).norm(2, 1) / noise.flatten(1).norm(2, 1) * size;
  return a + noise * scale.view({-1, 1, 1});
}

std::vector<int64_t> statuses(const Eigenbasis& basis) {
  auto status = basis.status.contiguous();
  return {status.data_ptr<int64_t>(), status.data_ptr<int64_t>() + status.numel()};
}

TEST(WarmEigen, ToleranceZeroIsPlainEvdBitForBit) {
  const auto a = testing::log_spaced_spectrum(4, 24, 1e3, 1).matrices.to(at::kFloat);
  const auto options = warm_evd(0.0).epsilon(1e-6);
  InverseRootWorkspace workspace;
  Eigenbasis basis;
  for (int call = 0; call < 2; ++call) {
    auto warm = inverse_root(a, 4, options, workspace, basis);
    EXPECT_TRUE(at::equal(warm, inverse_root(a, 4, options))) << "call " << call;
    EXPECT_THAT(statuses(basis), ::testing::Each(2));
  }
}

TEST(WarmEigen, BasisIsKeptWhileItStillDiagonalisesTheMatrix) {
  const auto spectrum = testing::log_spaced_spectrum(5, 32, 1e2, 2);
  InverseRootWorkspace workspace;
  Eigenbasis basis;
  (void)inverse_root(spectrum.matrices.to(at::kFloat), 4, warm_evd(1e-2), workspace, basis);
  EXPECT_THAT(statuses(basis), ::testing::Each(2)) << "no basis yet: eigh";

  const auto next = perturbed(spectrum.matrices, 1e-4, 3);
  auto root = inverse_root(next.to(at::kFloat), 4, warm_evd(1e-2), workspace, basis);
  EXPECT_THAT(statuses(basis), ::testing::Each(0));
  // Kept vectors, Rayleigh-quotient eigenvalues: within the tolerance of the root.
  EXPECT_LT(max_relative_error(root, eigh_inverse_root(next, 0.0, 4)), 1e-2);
  EXPECT_TRUE(basis.valid.all().item<bool>());
}

TEST(WarmEigen, AStaleBasisFallsBackToEigh) {
  const auto first = testing::log_spaced_spectrum(3, 16, 1e2, 4).matrices.to(at::kFloat);
  const auto unrelated = testing::log_spaced_spectrum(3, 16, 1e2, 5).matrices.to(at::kFloat);
  const auto options = warm_evd(1e-4);
  InverseRootWorkspace workspace;
  Eigenbasis basis;
  (void)inverse_root(first, 2, options, workspace, basis);
  auto root = inverse_root(unrelated, 2, options, workspace, basis);
  EXPECT_THAT(statuses(basis), ::testing::Each(2));
  // eigh's vectors in descending order (for later warm starts): the same root up to rounding.
  EXPECT_LT(max_relative_error(root, inverse_root(unrelated, 2, options)), 1e-5);
}

// Factors as the optimizer builds them, A ← β A + (1 − β) G Gᵀ (β = 0.99, a root
// every step): the warm start keeps each root near the float64 one, and most
// computations avoid eigh.
TEST(WarmEigen, TracksAnEmaFactorSequence) {
  const int64_t count = 6, b = 32, rank = 64;  // full rank, as a factor is after a few steps
  auto generator = at::detail::createCPUGenerator(6);
  auto g = at::randn({count, b, rank}, generator, at::kDouble);
  auto factor = at::bmm(g, g.transpose(1, 2));
  for (double tolerance : {2e-2, 1e-2}) {
    InverseRootWorkspace workspace;
    Eigenbasis basis;
    auto a = factor.clone();
    int64_t eigh_count = 0, total = 0;
    double worst = 0.0;
    for (int step = 0; step < 20; ++step) {
      g = at::randn({count, b, rank}, generator, at::kDouble);
      a = 0.99 * a + 0.01 * at::bmm(g, g.transpose(1, 2));
      const auto options = warm_evd(tolerance).epsilon(1e-3);
      auto root = inverse_root(a.to(at::kFloat), 4, options, workspace, basis);
      worst = std::max(worst, max_relative_error(root, eigh_inverse_root(a, 1e-3, 4)));
      eigh_count += (basis.status == 2).sum().item<int64_t>();
      total += count;
    }
    SCOPED_TRACE(tolerance);
    std::cout << "tolerance " << tolerance << ": worst relative error " << worst << ", eigh for " << eigh_count
              << " of " << total << " roots\n";
    EXPECT_LT(worst, tolerance * 2.0);
    EXPECT_LT(eigh_count, total / 2) << "the warm start was rarely used";
  }
}

TEST(WarmEigen, ANonFiniteMatrixLosesItsBasisAndGetsANanRoot) {
  auto a = testing::log_spaced_spectrum(3, 8, 10.0, 7).matrices.to(at::kFloat);
  InverseRootWorkspace workspace;
  Eigenbasis basis;
  (void)inverse_root(a, 4, warm_evd(1e-2), workspace, basis);
  a[1][2][3] = std::nan("");
  auto root = inverse_root(a, 4, warm_evd(1e-2), workspace, basis);
  EXPECT_TRUE(at::isnan(root[1]).all().item<bool>());
  EXPECT_TRUE(at::isfinite(root.index_select(0, at::tensor({0, 2}))).all().item<bool>());
  EXPECT_EQ(basis.valid[1].item<bool>(), false);
  EXPECT_EQ(basis.valid[0].item<bool>(), true);
}

TEST(WarmEigen, OptionsAndMethodAreChecked) {
  const auto a = testing::log_spaced_spectrum(2, 4, 10.0, 8).matrices.to(at::kFloat);
  InverseRootWorkspace workspace;
  Eigenbasis basis;
  EXPECT_THAT(testing::error_of([&] { inverse_root(a, 4, warm_evd(1.5), workspace, basis); }),
      HasSubstr("eigen_refresh_tolerance (eigen.refresh_tolerance) must be in [0, 1]"));
  EXPECT_THAT(testing::error_of([&] { inverse_root(a, 4, warm_evd(1e-2, -1), workspace, basis); }),
      HasSubstr("eigen_warm_iterations"));
  EXPECT_THAT(testing::error_of(
                  [&] { inverse_root(a, 4, dash::testing::solver_options(RootMethod::NewtonDB), workspace, basis); }),
      HasSubstr("Eigenbasis is for RootMethod::EVD"));
}

}  // namespace
}  // namespace dash
