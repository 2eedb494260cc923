// FLOP counts, checked against matmul counts worked out by hand from spec §5, and
// against the batched matmuls the solvers actually issue, counted at the
// dispatcher (RecordFunction) from their operand shapes.

#include <dash/inverse_root.h>
#include <dash/solver_cost.h>

#include "support/top_level_ops.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace dash {
namespace {

// 2·N·m·k·n of a bmm/baddbmm from its batch operands; 0 for any other op.
double matmul_flops(const at::RecordFunction& fn) {
  const char* name = fn.name();
  const bool baddbmm = std::strncmp(name, "aten::baddbmm", 13) == 0;
  if (!baddbmm && std::strncmp(name, "aten::bmm", 9) != 0) return 0.0;
  const auto inputs = fn.inputs();
  const auto& a = inputs[baddbmm ? 1 : 0].toTensor();
  const auto& b = inputs[baddbmm ? 2 : 1].toTensor();
  return 2.0 * static_cast<double>(a.size(0) * a.size(1) * a.size(2) * b.size(2));
}

// Matmul FLOPs that inverse_root() issues for `count` random SPD b × b matrices.
double issued_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options) {
  auto g = at::randn({count, b, b});
  auto a = at::baddbmm(at::eye(b) * 0.1, g, g.transpose(1, 2), 1.0, 1.0 / static_cast<double>(b));
  double flops = 0.0;
  testing::for_each_top_level_op(
      [&](const at::RecordFunction& fn) { flops += matmul_flops(fn); }, [&] { (void)inverse_root(a, p, options); });
  return flops;
}

TEST(SolverCost, FormulaEqualsTheMatmulsTheSolversIssue) {
  for (auto method : {RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev}) {
    for (auto polynomial :
        {NewtonDBPolynomial::NewtonSchulz, NewtonDBPolynomial::Minimax3, NewtonDBPolynomial::Minimax5}) {
      if (method != RootMethod::NewtonDB && polynomial != NewtonDBPolynomial::NewtonSchulz) continue;
      for (auto scaling : {Scaling::Frobenius, Scaling::MultiPowerIteration}) {
        for (int64_t p : {1, 2, 3, 4, 8}) {
          if (method == RootMethod::NewtonDB && p == 3) continue;  // powers of two only
          // 1 step; 3 and 7 (the minimax schedules stop by themselves after 4–7); 20.
          for (int64_t steps : {1, 3, 7, 20}) {
            auto options = InverseRootOptions()
                               .method(method)
                               .scaling(SpectralScaleOptions().method(scaling).iterations(4).vectors(5))
                               .newton(NewtonOptions().steps(steps))
                               .chebyshev(ChebyshevOptions().degree(steps + 2))
                               .newton_db(NewtonDBOptions().polynomial(polynomial));
            const auto label = "method " + std::to_string(static_cast<int>(method)) + ", polynomial " +
                               std::to_string(static_cast<int>(polynomial)) + ", scaling " +
                               std::to_string(static_cast<int>(scaling)) + ", p " + std::to_string(p) + ", steps " +
                               std::to_string(steps);
            EXPECT_DOUBLE_EQ(issued_flops(3, 12, p, options), inverse_root_flops(3, 12, p, options)) << label;
          }
        }
      }
    }
  }
}

constexpr double kMatmul64 = 2.0 * 64 * 64 * 64;

TEST(SolverCost, NewtonDBRootFourIsTwoPassesOfOnePlusThreePerStepLessOne) {
  auto options = InverseRootOptions()
                     .method(RootMethod::NewtonDB)
                     .scaling(SpectralScaleOptions().method(Scaling::Frobenius))
                     .newton(NewtonOptions().steps(10));
  // Each pass: 1 matmul in the optimised first step + 3 × 9 later steps = 28, less
  // the update the pass does not return in its last step (Z in the first pass, Y in
  // the second): 27.
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 64, 4, options), 3 * 54 * kMatmul64);
  // p = 2: one pass; p = 1: one pass and Z·Z.
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 2, options), 27 * kMatmul64);
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 1, options), 28 * kMatmul64);
}

TEST(SolverCost, CoupledNewtonRootFourIsFourMatmulsPerStepLessOne) {
  // N², N⁴, N⁴·M and X·N per step; X·N is free in step 1: 10·4 − 1 = 39.
  auto options = InverseRootOptions()
                     .method(RootMethod::CoupledNewton)
                     .scaling(SpectralScaleOptions().method(Scaling::Frobenius))
                     .newton(NewtonOptions().steps(10));
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 4, options), 39 * kMatmul64);
  // p = 3: N², N³ = N²·N... by squaring: N·M, N², N²·(NM): 3, plus X·N: 10·4 − 1.
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 3, options), 39 * kMatmul64);
}

TEST(SolverCost, ChebyshevIsDegreeMinusOneMatmulsPlusPowerIteration) {
  auto options = InverseRootOptions()
                     .method(RootMethod::Chebyshev)
                     .chebyshev(ChebyshevOptions().degree(40))
                     .scaling(SpectralScaleOptions().method(Scaling::MultiPowerIteration).iterations(10).vectors(16));
  EXPECT_DOUBLE_EQ(inverse_root_flops(2, 64, 4, options), 2 * (39 * kMatmul64 + 10 * 2.0 * 64 * 64 * 16));
}

TEST(SolverCost, RejectsNegativeCounts) { EXPECT_THROW(inverse_root_flops(-1, 64, 4), c10::Error); }

}  // namespace
}  // namespace dash
