// FLOP counts, checked against matmul counts worked out by hand from spec §5.

#include <dash/solver_cost.h>

#include <c10/util/Exception.h>

#include <gtest/gtest.h>

namespace dash {
namespace {

constexpr double kMatmul64 = 2.0 * 64 * 64 * 64;

TEST(SolverCost, NewtonDBRootFourIsTwoPassesOfOnePlusThreePerStep) {
  auto options = InverseRootOptions().method(RootMethod::NewtonDB).scaling(Scaling::Frobenius).newton_steps(10);
  // Each pass: 1 matmul in the optimised first step + 3 × 9 later steps = 28.
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 64, 4, options), 3 * 56 * kMatmul64);
  // p = 2: one pass; p = 1: one pass and Z·Z.
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 2, options), 28 * kMatmul64);
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 1, options), 29 * kMatmul64);
}

TEST(SolverCost, CoupledNewtonRootFourIsFourMatmulsPerStepLessOne) {
  // N², N⁴, N⁴·M and X·N per step; X·N is free in step 1: 10·4 − 1 = 39.
  auto options = InverseRootOptions().method(RootMethod::CoupledNewton).scaling(Scaling::Frobenius).newton_steps(10);
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 4, options), 39 * kMatmul64);
  // p = 3: N², N³ = N²·N... by squaring: N·M, N², N²·(NM): 3, plus X·N: 10·4 − 1.
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 3, options), 39 * kMatmul64);
}

TEST(SolverCost, ChebyshevIsDegreeMinusOneMatmulsPlusPowerIteration) {
  auto options = InverseRootOptions().method(RootMethod::Chebyshev).chebyshev_degree(40)
      .scaling(Scaling::MultiPowerIteration).power_iterations(10).power_vectors(16);
  EXPECT_DOUBLE_EQ(inverse_root_flops(2, 64, 4, options), 2 * (39 * kMatmul64 + 10 * 2.0 * 64 * 64 * 16));
}

TEST(SolverCost, RejectsNegativeCounts) {
  EXPECT_THROW(inverse_root_flops(-1, 64, 4), c10::Error);
}

}  // namespace
}  // namespace dash
