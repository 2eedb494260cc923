// FLOP counts, checked against matmul counts worked out by hand from spec §5, and
// against the batched matmuls the solvers actually issue, counted at the
// dispatcher (RecordFunction) from their operand shapes.

#include <dash/inverse_root.h>
#include <dash/solver_cost.h>

#include "common/memory_peak.h"
#include "kernels/stack_blas.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"
#include "support/top_level_ops.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace dash {
namespace {

// How a symmetric product (dash::symmetric_product: one triangle by GEMM panels,
// kernels/stack_blas.h) is counted: as the GEMM it stands for, or as run.
enum class Count { AsGemm, AsRun };

// 2·N·m·k·n of a bmm/baddbmm or a split GEMM (dash::gemm: inputs C, A, B) from
// its batch operands, and of a symmetric product (inputs C, A, B) as a GEMM or as
// run; 0 for any other op.
double matmul_flops(const at::RecordFunction& fn, Count count) {
  const char* name = fn.name();
  const auto inputs = fn.inputs();
  if (std::strcmp(name, "dash::symmetric_product") == 0) {
    const auto& c = inputs[0].toTensor();
    const double n = static_cast<double>(c.size(1));
    const double per_matrix = count == Count::AsRun ? kernels::symmetric_product_flops(c.size(1)) : 2.0 * n * n * n;
    return static_cast<double>(c.size(0)) * per_matrix;
  }
  const bool with_output = std::strncmp(name, "aten::baddbmm", 13) == 0 || std::strcmp(name, "dash::gemm") == 0;
  if (!with_output && std::strncmp(name, "aten::bmm", 9) != 0) return 0.0;
  const auto& a = inputs[with_output ? 1 : 0].toTensor();
  const auto& b = inputs[with_output ? 2 : 1].toTensor();
  return 2.0 * static_cast<double>(a.size(0) * a.size(1) * a.size(2) * b.size(2));
}

// Matmul FLOPs that inverse_root() issues for `count` random SPD b × b matrices.
double issued_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options, Count as = Count::AsGemm) {
  auto g = at::randn({count, b, b});
  auto a = at::baddbmm(at::eye(b) * 0.1, g, g.transpose(1, 2), 1.0, 1.0 / static_cast<double>(b));
  double flops = 0.0;
  testing::for_each_top_level_op(
      [&](const at::RecordFunction& fn) { flops += matmul_flops(fn, as); }, [&] { (void)inverse_root(a, p, options); });
  return flops;
}

TEST(SolverCost, FormulaEqualsTheMatmulsTheSolversIssue) {
  for (auto method : dash::testing::matmul_solvers()) {
    for (auto polynomial :
        {NewtonDBPolynomial::NewtonSchulz, NewtonDBPolynomial::Minimax3, NewtonDBPolynomial::Minimax5}) {
      if (method != RootMethod::NewtonDB && polynomial != NewtonDBPolynomial::NewtonSchulz) continue;
      for (auto scaling : {Scaling::Frobenius, Scaling::MultiPowerIteration}) {
        for (int64_t p : {1, 2, 3, 4, 8}) {
          if (method == RootMethod::NewtonDB && p == 3) continue;  // powers of two only
          // 1 step; 3 and 7 (the minimax schedules stop by themselves after 4–7); 20.
          for (int64_t steps : {1, 3, 7, 20}) {
            auto options =
                dash::testing::solver_options(method)
                    .scaling(SpectralScaleOptions().method(scaling).iterations(4).vectors(5))
                    .newton(NewtonOptions().steps(steps))
                    .chebyshev(ChebyshevOptions().degree(steps + 2))
                    .newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Matmuls).polynomial(polynomial));
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
  auto options = dash::testing::solver_options(RootMethod::NewtonDB)
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
  auto options = dash::testing::solver_options(RootMethod::CoupledNewton)
                     .scaling(SpectralScaleOptions().method(Scaling::Frobenius))
                     .newton(NewtonOptions().steps(10));
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 4, options), 39 * kMatmul64);
  // p = 3: N², N³ = N²·N... by squaring: N·M, N², N²·(NM): 3, plus X·N: 10·4 − 1.
  EXPECT_DOUBLE_EQ(inverse_root_flops(1, 64, 3, options), 39 * kMatmul64);
}

// By eigh, NewtonDB does EVD's work whatever its steps and scaling: the scalar
// iteration on b eigenvalues is O(b), and no power iteration runs.
TEST(SolverCost, NewtonDBByEighCostsWhatEVDCosts) {
  const auto by_eigh = dash::testing::solver_options(RootMethod::NewtonDB)
                           .newton(NewtonOptions().steps(17))
                           .newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Eigh));
  const auto evd = dash::testing::solver_options(RootMethod::EVD);
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 64, 4, by_eigh), inverse_root_flops(3, 64, 4, evd));
  EXPECT_LT(inverse_root_flops(3, 64, 4, by_eigh),
      inverse_root_flops(
          3, 64, 4, InverseRootOptions(by_eigh).newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Matmuls))) /
          4);
}

TEST(SolverCost, ChebyshevIsDegreeMinusOneMatmulsPlusPowerIteration) {
  auto options = dash::testing::solver_options(RootMethod::Chebyshev)
                     .chebyshev(ChebyshevOptions().degree(40))
                     .scaling(SpectralScaleOptions().method(Scaling::MultiPowerIteration).iterations(10).vectors(16));
  EXPECT_DOUBLE_EQ(inverse_root_flops(2, 64, 4, options), 2 * (39 * kMatmul64 + 10 * 2.0 * 64 * 64 * 16));
}

// The count on a device: the same matmuls, the symmetric products at what this
// CPU runs for them (one triangle where stack_symmetric_product_plan() says so, a
// GEMM where not: then both counts agree); 16-bit modes run whole GEMMs. Sizes
// of one panel (12) and of several (96, ragged 100).
TEST(SolverCost, DeviceCountEqualsTheMatmulsAsRun) {
  const at::Device cpu(at::kCPU);
  for (auto method : dash::testing::matmul_solvers()) {
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16}) {
      for (int64_t b : {12, 96, 100}) {
        auto options =
            dash::testing::solver_options(method)
                .precision(precision)
                .scaling(SpectralScaleOptions().method(Scaling::MultiPowerIteration).iterations(3).vectors(4))
                .newton(NewtonOptions().steps(4))
                .chebyshev(ChebyshevOptions().degree(6));
        const auto label = to_string(method) + ", " + to_string(precision) + ", b " + std::to_string(b);
        EXPECT_DOUBLE_EQ(issued_flops(2, b, 4, options, Count::AsRun), inverse_root_flops(2, b, 4, options, cpu))
            << label;
      }
    }
  }
  // A GPU has no one-triangle product: there the count is the GEMM count.
  const auto ndb = dash::testing::solver_options(RootMethod::NewtonDB);
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 256, 4, ndb, at::Device(at::kCUDA, 0)), inverse_root_flops(3, 256, 4, ndb));
  if (kernels::stack_symmetric_product_plan(cpu).one_triangle) {
    // b = 256: a triangle is 0.5625 of a GEMM. Every CN product is one; NewtonDB's
    // Z·Y (18 of its 54) stays whole: (18 + 36 · 0.5625)/54 = 0.708.
    const auto cn = dash::testing::solver_options(RootMethod::CoupledNewton);
    EXPECT_LT(inverse_root_flops(3, 256, 4, cn, cpu), 0.6 * inverse_root_flops(3, 256, 4, cn));
    const double ndb_ratio = inverse_root_flops(3, 256, 4, ndb, cpu) / inverse_root_flops(3, 256, 4, ndb);
    EXPECT_GT(ndb_ratio, 0.7);
    EXPECT_LT(ndb_ratio, 0.72);
  }
}

// NewtonDBEvaluation::Auto (the default) costs what it resolves to on the device;
// without a device it counts as the matmul iteration.
TEST(SolverCost, NewtonDBAutoCostsWhatItRunsOnTheDevice) {
  const auto automatic = InverseRootOptions().method(RootMethod::NewtonDB);
  auto with = [&](NewtonDBEvaluation evaluation) { return testing::with_evaluation(automatic, evaluation); };
  const at::Device cpu(at::kCPU);
  const at::Device cuda(at::kCUDA, 0);
  EXPECT_DOUBLE_EQ(
      inverse_root_flops(3, 64, 4, automatic), inverse_root_flops(3, 64, 4, with(NewtonDBEvaluation::Matmuls)));
  EXPECT_DOUBLE_EQ(
      inverse_root_flops(3, 64, 4, automatic, cpu), inverse_root_flops(3, 64, 4, with(NewtonDBEvaluation::Eigh), cpu));
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 64, 4, automatic, cuda),
      inverse_root_flops(3, 64, 4, with(NewtonDBEvaluation::Matmuls), cuda));
  const auto bf16 = InverseRootOptions(automatic).precision(MatmulPrecision::BF16);
  EXPECT_DOUBLE_EQ(inverse_root_flops(3, 64, 4, bf16, cpu),
      inverse_root_flops(3, 64, 4, testing::with_evaluation(bf16, NewtonDBEvaluation::Matmuls), cpu));
  EXPECT_LT(inverse_root_flops(3, 64, 4, automatic, cpu), inverse_root_flops(3, 64, 4, automatic, cuda) / 4);
}

// The workspace bound against the allocator: inverse_root() holds at most
// inverse_root_workspace_bytes() at its peak (its workspace's buffers, the root it
// returns, and whatever its operations allocate besides), with an empty workspace
// and with one that holds its buffers from an earlier call, for every method,
// precision, evaluation and a warm eigenbasis; and the bound is not loose (within
// 1.5x on the larger stacks).
TEST(SolverWorkspace, BoundHoldsTheAllocatorsPeak) {
  const at::Device cpu(at::kCPU);
  for (int64_t b : {32, 160}) {
    for (int64_t count : {1, 3, 8, 24}) {
      auto matrices = testing::log_spaced_spectrum(count, b, 1e3, 5).matrices.to(at::kFloat);
      for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16, MatmulPrecision::FP16}) {
        for (int variant = 0; variant < 6; ++variant) {
          auto options = variant == 4 ? testing::with_evaluation(
                                            InverseRootOptions().method(RootMethod::NewtonDB), NewtonDBEvaluation::Eigh)
                         : variant == 5 ? InverseRootOptions().method(RootMethod::EVD)
                                        : testing::solver_options(kSolverMethods[variant]);
          options.precision(precision);
          const bool warm = variant == 5;
          if (warm) options.eigen().refresh_tolerance(0.05);
          Eigenbasis basis{at::zeros({count, b, b}), at::zeros({count}, at::kBool), {}};
          InverseRootWorkspace workspace;
          // Twice: with an empty workspace (the peak is its growth and the
          // temporaries), then with the one that holds its buffers (held + peak).
          int64_t held_and_peak = 0;
          for (int call = 0; call < 2; ++call) {
            const auto held = workspace.bytes();
            common::MeasureMemoryPeak measure;
            ASSERT_TRUE(measure.measuring());
            auto root = warm ? inverse_root(matrices, 4, options, workspace, basis)
                             : inverse_root(matrices, 4, options, workspace);
            held_and_peak = std::max(held_and_peak, held + measure.peak_bytes());
          }
          const auto bound = inverse_root_workspace_bytes(count, b, options, cpu, warm);
          const auto label = "variant " + std::to_string(variant) + ", precision " +
                             std::to_string(static_cast<int>(precision)) + ", b " + std::to_string(b) + ", count " +
                             std::to_string(count);
          EXPECT_LE(held_and_peak, bound) << label;
          if (count == 24 && b == 160)
            EXPECT_GE(static_cast<double>(held_and_peak) * 1.5, static_cast<double>(bound)) << label;
        }
      }
    }
  }
}

TEST(SolverCost, RejectsNegativeCounts) { EXPECT_THROW(inverse_root_flops(-1, 64, 4), c10::Error); }

}  // namespace
}  // namespace dash
