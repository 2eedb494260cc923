// A stack gives the same roots as its matrices solved one at a time, and shapes
// and dtypes come back as documented.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <gtest/gtest.h>

namespace dash {
namespace {

using testing::log_spaced_spectrum;
using testing::max_relative_error;

class BatchedEqualsSingle : public ::testing::TestWithParam<std::tuple<RootMethod, Scaling>> {};

// Every matrix of a stack is processed independently (per-matrix scale, batched
// matmuls, batched eigh), so a stack and single calls agree up to the summation
// order a BLAS may pick for a different batch size: 1e-5 relative, ~100 float32
// roundoffs. The stack mixes condition numbers and magnitudes so that a scale
// shared across the stack by mistake would show.
TEST_P(BatchedEqualsSingle, StackOfFiveMatchesFiveSingleCalls) {
  auto [method, scaling] = GetParam();
  auto options = dash::testing::solver_options(method).scaling(SpectralScaleOptions().method(scaling));
  std::vector<at::Tensor> matrices;
  const double conditions[] = {1.0, 3.0, 10.0, 30.0, 100.0};
  const double tops[] = {1.0, 1e-3, 1e3, 5.0, 1e-6};
  for (int i = 0; i < 5; ++i) {
    matrices.push_back(log_spaced_spectrum(1, 24, conditions[i], 40 + i, tops[i]).matrices[0].to(at::kFloat));
  }
  auto stacked = inverse_root(at::stack(matrices), 4, options);
  for (int i = 0; i < 5; ++i) {
    auto single = inverse_root(matrices[i], 4, options);
    ASSERT_EQ(single.dim(), 2);
    EXPECT_LE(max_relative_error(stacked[i], single), 1e-5) << "matrix " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllMethods, BatchedEqualsSingle,
    ::testing::Combine(::testing::ValuesIn(kSolverMethods),
        ::testing::Values(Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration)),
    [](const auto& info) {
      return to_string(std::get<0>(info.param)) + "_" + std::to_string(static_cast<int>(std::get<1>(info.param)));
    });

TEST(InverseRootShapes, DtypesFollowTheDocumentedRule) {
  auto a = log_spaced_spectrum(2, 6, 10.0, 1).matrices;
  EXPECT_EQ(inverse_root(a, 2).scalar_type(), at::kDouble);
  EXPECT_EQ(inverse_root(a.to(at::kFloat), 2).scalar_type(), at::kFloat);
  EXPECT_EQ(inverse_root(a.to(at::kHalf), 2).scalar_type(), at::kFloat);
  EXPECT_EQ(inverse_root(a.to(at::kBFloat16), 2).scalar_type(), at::kFloat);
}

TEST(InverseRootShapes, SingleMatrixAndDiagnosticsShapes) {
  auto a = log_spaced_spectrum(1, 6, 10.0, 2).matrices[0];
  auto result = inverse_root_with_diagnostics(a, 4);
  EXPECT_EQ(result.root.sizes(), a.sizes());
  EXPECT_EQ(result.residual.dim(), 0);
  EXPECT_EQ(result.finite.dim(), 0);
  auto stacked = inverse_root_with_diagnostics(a.unsqueeze(0).expand({3, 6, 6}), 4);
  EXPECT_EQ(stacked.residual.sizes(), at::IntArrayRef({3}));
  EXPECT_EQ(stacked.finite.scalar_type(), at::kBool);
}

// The residual is ‖X^p A − I‖_F/√b: small for a converged root, large for a
// deliberately unconverged one (2 Newton steps at κ = 1e4).
TEST(InverseRootShapes, ResidualSeparatesConvergedFromUnconverged) {
  auto a = log_spaced_spectrum(2, 32, 1e4, 3).matrices.to(at::kFloat);
  auto options = dash::testing::solver_options(RootMethod::NewtonDB).epsilon(0.0);
  auto converged = inverse_root_with_diagnostics(a, 4, InverseRootOptions(options).newton(NewtonOptions().steps(30)));
  auto unconverged = inverse_root_with_diagnostics(a, 4, InverseRootOptions(options).newton(NewtonOptions().steps(2)));
  EXPECT_LE(converged.residual.max().item<double>(), 1e-3);
  EXPECT_GE(unconverged.residual.min().item<double>(), 1e-1);
}

TEST(InverseRootShapes, EmptyStacks) {
  EXPECT_EQ(inverse_root(at::zeros({0, 4, 4}), 4).sizes(), at::IntArrayRef({0, 4, 4}));
  EXPECT_EQ(inverse_root(at::zeros({3, 0, 0}), 4).sizes(), at::IntArrayRef({3, 0, 0}));
}

TEST(InverseRootShapes, NonContiguousInputIsAccepted) {
  auto a = log_spaced_spectrum(3, 8, 10.0, 4).matrices.to(at::kFloat);
  auto transposed = a.transpose(1, 2);  // same matrices (symmetric), other strides
  ASSERT_FALSE(transposed.is_contiguous());
  EXPECT_LE(max_relative_error(inverse_root(transposed, 4), inverse_root(a, 4)), 1e-6);
}

}  // namespace
}  // namespace dash
