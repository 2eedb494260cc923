// LAPACK over a CPU stack split into ranges (src/kernels/stack_lapack.h, kernels/core_ranges.h): the ranges
// cover the stack once, run on their own threads when the plan says so, carry the
// caller's thread-local state, pass failures on, and give every matrix the result
// it gets alone; eigh and QR against float64 references.

#include "kernels/core_ranges.h"
#include "kernels/stack_lapack.h"
#include "support/allocation_counter.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace dash::kernels {
namespace {

using ::testing::HasSubstr;

at::Tensor random_spd_stack(int64_t count, int64_t size) {
  at::manual_seed(7);
  auto g = at::randn({count, size, 2 * size}, at::kFloat);
  return at::bmm(g, g.transpose(1, 2)).div_(2.0 * size).add_(at::eye(size, at::kFloat), 1e-3);
}

// Eigenvalues and eigenvectors, the latter written in place (column-major).
std::pair<at::Tensor, at::Tensor> eigh_of(const at::Tensor& stack) {
  auto vectors = kernels::column_major_view(at::empty_like(stack));
  auto values = kernels::stack_eigh(stack, vectors);
  return {values, vectors};
}

struct RecordedRanges {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;
};

TEST(StackLapack, RangesCoverTheStackOnceAsThePlanSays) {
  for (int64_t count : {1, 2, 3, 7, 64}) {
    const auto stack = at::zeros({count, 2, 2});
    RecordedRanges recorded;
    kernels::for_each_stack_range(stack, [&](int64_t first, int64_t last) {
      const std::lock_guard<std::mutex> lock(recorded.mutex);
      recorded.ranges.emplace_back(first, last);
      recorded.threads.insert(std::this_thread::get_id());
    });
    const auto plan = kernels::stack_lapack_plan(count, stack.device());
    ASSERT_EQ(static_cast<int64_t>(recorded.ranges.size()), plan.workers) << plan.description;
    EXPECT_EQ(static_cast<int64_t>(recorded.threads.size()), plan.workers) << plan.description;
    std::sort(recorded.ranges.begin(), recorded.ranges.end());
    int64_t next = 0;
    for (const auto& [first, last] : recorded.ranges) {
      EXPECT_EQ(first, next) << "count " << count;
      EXPECT_GT(last, first) << "count " << count;
      next = last;
    }
    EXPECT_EQ(next, count);
  }
}

TEST(StackLapack, AnEmptyStackIsOneEmptyRange) {
  int calls = 0;
  kernels::for_each_stack_range(at::zeros({0, 3, 3}), [&](int64_t first, int64_t last) {
    ++calls;
    EXPECT_EQ(first, 0);
    EXPECT_EQ(last, 0);
  });
  EXPECT_EQ(calls, 1);
}

// This machine's LibTorch links Debian's pthreads OpenBLAS with one thread per
// core; where another BLAS is linked the plan must say why it keeps one call.
TEST(StackLapack, ThePlanSplitsOnlyWhereItCanControlTheBlas) {
  const auto plan = kernels::stack_lapack_plan(16, at::Device(at::kCPU));
  if (plan.workers == 1) {
    EXPECT_THAT(plan.description, HasSubstr("one call per stack ("));
  } else {
    EXPECT_THAT(plan.description, HasSubstr("single-threaded"));
    EXPECT_LE(plan.workers, 16);
  }
  EXPECT_EQ(kernels::stack_lapack_plan(1, at::Device(at::kCPU)).workers, 1);
}

TEST(StackLapack, RangesSeeTheCallersGradMode) {
  const auto stack = at::zeros({8, 2, 2});
  for (bool enabled : {false, true}) {
    const at::AutoGradMode mode(enabled);
    std::mutex mutex;
    std::vector<bool> seen;
    kernels::for_each_stack_range(stack, [&](int64_t, int64_t) {
      const std::lock_guard<std::mutex> lock(mutex);
      seen.push_back(at::GradMode::is_enabled());
    });
    for (bool in_range : seen) EXPECT_EQ(in_range, enabled);
  }
}

TEST(StackLapack, AFailingRangeIsRethrownAfterAllRangesAndTheBlasIsRestored) {
  const auto stack = at::zeros({6, 2, 2});
  const auto before = kernels::stack_lapack_plan(6, stack.device()).description;
  std::mutex mutex;
  int64_t finished = 0;
  try {
    kernels::for_each_stack_range(stack, [&](int64_t first, int64_t last) {
      if (last == 6) throw std::runtime_error("range ending at 6 failed");
      const std::lock_guard<std::mutex> lock(mutex);
      finished += last - first;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_THAT(error.what(), HasSubstr("range ending at 6 failed"));
  }
  const auto plan = kernels::stack_lapack_plan(6, stack.device());
  EXPECT_EQ(finished, 6 * (plan.workers - 1) / plan.workers);  // every range but the last one
  EXPECT_EQ(plan.description, before);                         // the thread count is back
}

TEST(StackLapack, EighMatchesFloat64AndReconstructsTheStack) {
  const auto stack = random_spd_stack(5, 48);
  const auto [values, vectors] = eigh_of(stack);
  ASSERT_EQ(values.sizes(), (at::IntArrayRef{5, 48}));
  ASSERT_EQ(vectors.sizes(), stack.sizes());
  const auto reference = at::linalg_eigvalsh(stack.to(at::kDouble));
  EXPECT_LT(((values.to(at::kDouble) - reference).abs() / reference.abs()).max().item<double>(), 1e-4);
  const auto rebuilt = at::bmm(vectors * values.unsqueeze(1), vectors.transpose(1, 2));
  EXPECT_LT(((rebuilt - stack).norm() / stack.norm()).item<double>(), 1e-5);
  const auto gram = at::bmm(vectors.transpose(1, 2), vectors);
  EXPECT_LT((gram - at::eye(48)).abs().max().item<double>(), 1e-5);
}

// A matrix's eigendecomposition does not depend on the stack it is solved in:
// batched and per-block roots agree bit for bit.
TEST(StackLapack, EachMatrixGetsWhatItGetsAlone) {
  const auto stack = random_spd_stack(6, 256);
  const auto [values, vectors] = eigh_of(stack);
  for (int64_t i = 0; i < 6; ++i) {
    const auto [alone_values, alone_vectors] = eigh_of(stack.slice(0, i, i + 1));
    EXPECT_TRUE(at::equal(values.slice(0, i, i + 1), alone_values)) << "matrix " << i;
    EXPECT_TRUE(at::equal(vectors.slice(0, i, i + 1), alone_vectors)) << "matrix " << i;
  }
}

TEST(StackLapack, EighWritesAnyLayoutOfVectors) {
  const auto stack = random_spd_stack(4, 24);
  const auto [values, in_place] = eigh_of(stack);
  auto row_major = at::empty_like(stack);
  EXPECT_TRUE(at::equal(kernels::stack_eigh(stack, row_major), values));
  EXPECT_TRUE(at::equal(row_major, in_place));
}

TEST(StackLapack, QrFactorsTheStack) {
  const auto stack = random_spd_stack(5, 40);
  const auto [q, r] = kernels::stack_qr(stack);
  EXPECT_LT(((at::bmm(q, r) - stack).norm() / stack.norm()).item<double>(), 1e-5);
  EXPECT_LT((at::bmm(q.transpose(1, 2), q) - at::eye(40)).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(at::equal(r, r.triu()));
  const auto [reference_q, reference_r] = at::linalg_qr(stack.to(at::kDouble));
  EXPECT_LT(
      (r.to(at::kDouble) - reference_r).abs().max().item<double>(), 1e-4 * reference_r.abs().max().item<double>());
}

// The counter sees every thread of a split (the helpers carry the caller's
// thread-local state), and counts exactly while they report at once; the test
// splits only where the split runs threads (a pthreads OpenBLAS, two cores or more).
TEST(AllocationCounter, CountsEveryThreadOfASplitExactly) {
  const at::Device cpu(at::kCPU);
  constexpr int64_t kItems = 64;
  constexpr int64_t kPerItem = 50;
  std::atomic<int64_t> ranges{0};
  testing::CountAllocations counter;
  kernels::for_each_range(kItems, cpu, [&](int64_t first, int64_t last) {
    ++ranges;
    for (int64_t item = first; item < last; ++item) {
      for (int64_t i = 0; i < kPerItem; ++i) (void)at::empty({16});
    }
  });
  EXPECT_EQ(counter.reporter().count.load(), kItems * kPerItem);
  EXPECT_EQ(counter.reporter().in_matmul.load(), 0);
  if (kernels::stack_lapack_plan(kItems, cpu).workers < 2) {
    std::cout << "one range: the split ran on this thread only\n";
  } else {
    EXPECT_GE(ranges.load(), 2);
  }
}

}  // namespace
}  // namespace dash::kernels
