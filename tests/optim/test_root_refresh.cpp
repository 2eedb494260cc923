// The per-factor-stack root policy (optim/families/shampoo_roots.h) on hand-built state: only
// due factors get new roots (against a float64 reference), a failed root keeps the
// previous one and is counted, an overflowing factor restarts from zero, and the
// chunk size follows the workspace budget.

#include "optim/families/shampoo_roots.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace dash::optim {
namespace {

constexpr int64_t kCount = 4;
constexpr int64_t kSize = 6;

struct Fixture {
  blocking::FactorStack stack{0, kSize, 4, kCount};
  FactorStackState state;
  InverseRootWorkspace solvers;
  kernels::Scratch scratch;
  at::Tensor resets_total = at::zeros({}, at::kLong);
  RootBuffers buffers{solvers, scratch, resets_total};

  Fixture() {
    auto generator = at::detail::createCPUGenerator(3);
    auto g = at::randn({kCount, kSize, 3 * kSize}, generator);
    state.factors = at::bmm(g, g.transpose(1, 2)).div_(3 * kSize);
    state.roots = at::eye(kSize).expand({kCount, kSize, kSize}).contiguous();
    state.failures = at::zeros({}, at::kLong);
  }

  void refresh(const std::vector<bool>& due, double limit = 0.0) {
    const auto options =
        DashOptions().root(dash::testing::solver_options(RootMethod::EVD)).execution(Execution::Batched);
    refresh_roots(stack, options, WorkspaceBudget{static_cast<int64_t>(limit)}, due, state, buffers);
  }
};

TEST(RootRefresh, OnlyDueFactorsGetNewRoots) {
  for (double limit : {0.0, 1.0}) {  // whole stack, and chunks of one factor
    Fixture f;
    const auto reference = testing::eigh_inverse_root(f.state.factors.to(at::kDouble), 1e-10, 4);
    f.refresh({true, false, true, false}, limit);
    for (int64_t i : {0, 2}) {
      EXPECT_LT(testing::max_relative_error(f.state.roots[i].unsqueeze(0), reference[i].unsqueeze(0)), 1e-4)
          << "factor " << i << ", limit " << limit;
    }
    for (int64_t i : {1, 3}) EXPECT_TRUE(at::equal(f.state.roots[i], at::eye(kSize))) << "factor " << i;
    EXPECT_EQ(f.state.failures.item<int64_t>(), 0);
  }
}

TEST(RootRefresh, AFailedRootKeepsThePreviousOneAndIsCounted) {
  Fixture f;
  f.state.factors[1].fill_(std::numeric_limits<float>::quiet_NaN());
  f.refresh({true, true, true, true});
  EXPECT_TRUE(at::equal(f.state.roots[1], at::eye(kSize)));
  EXPECT_FALSE(at::equal(f.state.roots[0], at::eye(kSize)));
  EXPECT_EQ(f.state.failures.item<int64_t>(), 1);
  EXPECT_EQ(f.state.consecutive_failures[1].item<int64_t>(), 1);
  EXPECT_EQ(f.state.consecutive_failures[0].item<int64_t>(), 0);
}

// Above FLT_MAX/(16 b) the solvers' spectral scale could overflow: such a factor
// restarts from zero (and keeps its last good root), counted in its stack and in
// the engine's total.
TEST(RootRefresh, AFactorAboutToOverflowRestartsFromZero) {
  Fixture f;
  f.state.factors[2].mul_(std::numeric_limits<float>::max() / 4.0 / f.state.factors[2].abs().max().item<double>());
  f.refresh({true, true, true, true});
  EXPECT_TRUE(at::equal(f.state.factors[2], at::zeros({kSize, kSize})));
  EXPECT_FALSE(at::equal(f.state.factors[0], at::zeros({kSize, kSize})));
  EXPECT_EQ(f.state.factor_resets.item<int64_t>(), 1);
  EXPECT_EQ(f.resets_total.item<int64_t>(), 1);
}

TEST(RootRefresh, FactorsPerChunkFollowTheBudget) {
  Fixture f;
  const auto root = dash::testing::solver_options(RootMethod::EVD);
  EXPECT_EQ(factors_per_chunk(f.stack, f.state, root, false, WorkspaceBudget{}), kCount) << "no limit: the stack";
  EXPECT_EQ(factors_per_chunk(f.stack, f.state, root, false, WorkspaceBudget{1}), 1) << "a byte: one factor";
  const auto plenty = WorkspaceBudget{int64_t{1} << 30};
  EXPECT_EQ(factors_per_chunk(f.stack, f.state, root, false, plenty), kCount);
}

}  // namespace
}  // namespace dash::optim
