// Allocation-free steady state: after warm-up, a non-root optimizer step
// allocates nothing of stack size, and neither the solvers' iterations nor a
// whole root step allocate more with more Newton steps or more optimizer steps.
// Allocations are counted through c10's memory-reporting hook on this thread and
// the helper threads of its splits (tests/support/allocation_counter.h), the same
// on CPU and CUDA.

#include <dash/distributed.h>
#include <dash/inverse_root.h>
#include <dash/optimizer.h>

#include "support/allocation_counter.h"
#include "support/gloo_skip.h"
#include "support/gloo_threads.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <iostream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

namespace dash {
namespace {

using testing::CountAllocations;

struct StepAllocations {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t largest = 0;
};

// Allocations of each of `steps` optimizer steps on fixed shapes (two matrices
// that tile into 16×16 blocks, one with ragged edges, one vector).
std::vector<StepAllocations> allocations_per_step(const InverseRootOptions& root, int64_t steps,
    const at::Device& device, MatmulPrecision preconditioning = MatmulPrecision::FP32) {
  std::vector<at::Tensor> params;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{64, 48}, {40, 37}, {32}}) {
    params.push_back(at::randn(shape, at::TensorOptions().device(device)).set_requires_grad(true));
  }
  // Batched: Execution::Auto's one-off timing would add a few solves to one root step.
  Dash optimizer(params, DashOptions(1e-3)
                             .block_size(16)
                             .start_step(1)
                             .root_frequency(4)
                             .root(root)
                             .execution(Execution::Batched)
                             .preconditioning_precision(preconditioning));
  std::vector<StepAllocations> result;
  for (int64_t step = 0; step < steps; ++step) {
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    CountAllocations counter;
    optimizer.step();
    result.push_back({counter.reporter().count, counter.reporter().bytes, counter.reporter().largest});
  }
  return result;
}

std::string describe(const std::vector<StepAllocations>& steps) {
  std::string text;
  for (size_t i = 0; i < steps.size(); ++i) {
    text += "step " + std::to_string(i + 1) + ": " + std::to_string(steps[i].count) + " allocations, " +
            std::to_string(steps[i].bytes) + " bytes, largest " + std::to_string(steps[i].largest) + "\n";
  }
  return text;
}

// On the CPU everywhere; on CUDA where a device is present (bench/gpu.sh), where
// the caching allocator still reports every tensor it hands out.
class StepAllocationsTest : public ::testing::TestWithParam<std::tuple<RootMethod, c10::DeviceType>> {};

TEST_P(StepAllocationsTest, SteadyStateDoesNotGrowWithStepsOrNewtonSteps) {
  const auto [method, device_type] = GetParam();
  if (device_type == c10::DeviceType::CUDA && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(device_type);
  // Root steps are 1, 5, 9; the rest only update factors and precondition.
  const auto few =
      allocations_per_step(dash::testing::solver_options(method).newton(NewtonOptions().steps(5)), 10, device);
  const auto many =
      allocations_per_step(dash::testing::solver_options(method).newton(NewtonOptions().steps(15)), 10, device);
  std::cout << "newton_steps 5:\n" << describe(few) << "newton_steps 15:\n" << describe(many);
  const int64_t block_bytes = 16 * 16 * 4;
  for (size_t i = 1; i < few.size(); ++i) {
    const bool root_step = i % 4 == 0;
    if (!root_step) {
      // Only scalars and per-block (n, 1, 1) factors: nothing the size of a block.
      EXPECT_LT(few[i].largest, block_bytes) << "step " << i + 1;
      EXPECT_EQ(few[i].count, few[1].count) << "step " << i + 1;
    }
    if (i >= 5) {
      EXPECT_EQ(few[i].count, few[i - 4].count) << "step " << i + 1;
    }
    if (i >= 4) {
      // After the first root step has filled the workspace: the same every time,
      // and the same for 5 and 15 Newton steps.
      EXPECT_EQ(few[i].count, many[i].count) << "step " << i + 1;
      EXPECT_EQ(few[i].bytes, many[i].bytes) << "step " << i + 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IterativeMethods, StepAllocationsTest,
    ::testing::Combine(::testing::ValuesIn(dash::testing::matmul_solvers()),
        ::testing::Values(c10::DeviceType::CPU, c10::DeviceType::CUDA)),
    [](const ::testing::TestParamInfo<std::tuple<RootMethod, c10::DeviceType>>& info) {
      return to_string(std::get<0>(info.param)) + (std::get<1>(info.param) == c10::DeviceType::CUDA ? "_cuda" : "_cpu");
    });

// After warm-up, a non-root step allocates nothing on the parameters' device, not
// even a scalar: on CUDA every allocation is a trip through the caching allocator,
// and from Python the step's cost (bench/cuda_step_probe.py counts them there). The
// numbers ATen wraps for `.Scalar` operators are host tensors on CUDA and are not
// counted (support/allocation_counter.h). Default options but for the block size,
// grafting Adam with bias correction, a vector on AdamW; each method's roots.
class NonRootStepTest : public ::testing::TestWithParam<std::tuple<RootMethod, c10::DeviceType>> {};

// Steps a fresh optimizer with `options` (block size 16, roots at steps 2, 6, 10)
// over three matrices and a vector, and expects no allocation on the device in the
// non-root steps from step 4 on.
void expect_allocation_free_non_root_steps(DashOptions options, c10::DeviceType device_type) {
  std::vector<at::Tensor> params;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{64, 48}, {40, 37}, {32}, {48}}) {
    params.push_back(at::randn(shape, at::TensorOptions(device_type)).set_requires_grad(true));
  }
  Dash optimizer(params, options.block_size(16).start_step(2).root_frequency(4));
  for (int64_t step = 1; step <= 11; ++step) {
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    CountAllocations counter(1, device_type);
    optimizer.step();
    const bool root_step = step >= 2 && (step - 2) % 4 == 0;
    if (step >= 4 && !root_step) {
      EXPECT_EQ(counter.reporter().count, 0) << "step " << step << " allocated, by site:\n"
                                             << counter.reporter().sites();
    }
  }
}

TEST_P(NonRootStepTest, AllocatesNothingOnItsDevice) {
  const auto [method, device_type] = GetParam();
  if (device_type == c10::DeviceType::CUDA && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  expect_allocation_free_non_root_steps(DashOptions(1e-3).root(dash::testing::solver_options(method)), device_type);
}

// The CPU, and CUDA where a device is present.
std::vector<c10::DeviceType> devices_present() {
  if (!at::hasCUDA()) return {c10::DeviceType::CPU};
  return {c10::DeviceType::CPU, c10::DeviceType::CUDA};
}

// The same for the options that take other paths through the step: chunks within a
// workspace limit, bf16 preconditioning, momentum, weight decay, bf16 state, one
// block at a time, grafting without a statistic, and a root failure limit (checked
// every step, as the groups' limits may change), and spectral descent (every step
// of it a non-root one).
TEST(NonRootStep, OtherPathsAllocateNothingEither) {
  const std::vector<std::pair<std::string, DashOptions>> variants = {
      {"workspace limit", DashOptions(1e-3).workspace_limit(1)},
      {"bf16 preconditioning", DashOptions(1e-3).preconditioning_precision(MatmulPrecision::BF16)},
      {"Nesterov momentum", DashOptions(1e-3).momentum(0.9).nesterov(true)},
      {"weight decay", DashOptions(1e-3).weight_decay(0.1)},
      {"bf16 roots and moments",
          DashOptions(1e-3).root_precision(MatmulPrecision::BF16).moment_precision(MatmulPrecision::BF16)},
      {"sequential", DashOptions(1e-3).execution(Execution::Sequential)},
      {"SGD grafting", DashOptions(1e-3).grafting(GraftingType::SGD)},
      {"root failure limit", DashOptions(1e-3).max_consecutive_root_failures(3)},
      {"spectral descent", DashOptions(1e-3).preconditioner(PreconditionerType::SpectralDescent)},
      {"spectral descent as Muon, bf16 Newton-Schulz, within a limit",
          DashOptions(1e-3)
              .preconditioner(PreconditionerType::SpectralDescent)
              .grafting(GraftingType::None)
              .nesterov_grad(true)
              .preconditioning_precision(MatmulPrecision::BF16)
              .workspace_limit(1)},
  };
  for (const auto& device_type : devices_present()) {
    for (const auto& [name, options] : variants) {
      SCOPED_TRACE(name + (device_type == c10::DeviceType::CUDA ? " on CUDA" : " on the CPU"));
      expect_allocation_free_non_root_steps(options, device_type);
    }
  }
}

// Steps where a matrix and a vector have no gradient (every even step): the
// matrix's blocks, between two other matrices' in the stack they share, are left
// out of that stack's work (two runs of blocks), and its t lags, so that within the
// stack some blocks are past t_start and some not; the vector's elements, between
// two others' in their AdamW segment, are put back after the segment's step.
// `scattered`: besides, every other one of ten 8 × 8 matrices (one block each, a
// stack of their own, in their order) has no gradient then, so that the stack's
// blocks with one are 5 runs, more than kMostRunsPerChunk: t advances by a mask, and
// without a limit the stack's chunk is a subset, gathered by index into scratch
// buffers (within the limit of 1 byte, each chunk is one block). Both kinds of step
// allocate nothing either, one block at a time or the whole stack at once.
void expect_allocation_free_steps_without_some_gradients(
    double workspace_limit, c10::DeviceType device_type, bool scattered) {
  std::vector<std::vector<int64_t>> shapes{{64, 48}, {40, 37}, {48, 32}, {32}, {24}, {16}};
  const auto first_single = static_cast<int64_t>(shapes.size());
  if (scattered) shapes.insert(shapes.end(), 10, {8, 8});
  std::vector<at::Tensor> params;
  for (const auto& shape : shapes) {
    params.push_back(at::randn(shape, at::TensorOptions(device_type)).set_requires_grad(true));
  }
  const int64_t start = 6, frequency = 4;
  Dash optimizer(params,
      DashOptions(1e-3).block_size(16).start_step(start).root_frequency(frequency).workspace_limit(workspace_limit));
  std::vector<int64_t> t(params.size(), 0);  // each parameter's own step count
  int64_t checked = 0, mixed = 0;
  for (int64_t step = 1; step <= 16; ++step) {
    bool root_step = false;
    for (size_t i = 0; i < params.size(); ++i) {
      const auto n = static_cast<int64_t>(i);
      const bool sometimes = n == 1 || n == 4 || (n >= first_single && (n - first_single) % 2 == 1);
      const bool has = !(sometimes && step % 2 == 0);
      params[i].mutable_grad() = has ? at::randn_like(params[i]) : at::Tensor();
      if (!has) continue;
      ++t[i];
      root_step = root_step || (params[i].dim() == 2 && t[i] >= start && (t[i] - start) % frequency == 0);
    }
    CountAllocations counter(1, device_type);
    optimizer.step();
    if (step > start + 1 && !root_step) {
      ++checked;
      if (step % 2 == 1 && t[1] < start) ++mixed;
      EXPECT_EQ(counter.reporter().count, 0) << "step " << step << " allocated, by site:\n"
                                             << counter.reporter().sites();
    }
  }
  EXPECT_GE(checked, 5);
  EXPECT_GE(mixed, 1) << "no step had blocks on both sides of t_start";
}

TEST(NonRootStep, StepsWithoutSomeGradientsAllocateNothing) {
  for (const auto& device_type : devices_present()) {
    for (bool scattered : {false, true}) {
      for (double limit : {1.0, 0.0}) {
        SCOPED_TRACE(std::string(limit > 0 ? "a block at a time" : "whole stacks") +
                     (scattered ? ", scattered blocks" : "") +
                     (device_type == c10::DeviceType::CUDA ? " on CUDA" : " on the CPU"));
        expect_allocation_free_steps_without_some_gradients(limit, device_type, scattered);
      }
    }
  }
}

// The same on ranks of every scheme (threads, tests/support/gloo_threads.h): the
// step's decision and the ranks' agreement travel in buffers kept across steps.
// Counted on each rank's own thread, where all of dash's work runs here (blocks too
// small to split over helper threads). LibTorch 2's Gloo backend allocates on its
// worker threads (once a step under Replicated, 11 times under Zero, in the LibTorch
// 2.6 check): the backend's own, as a matmul kernel's are.
TEST(NonRootStep, RanksOfEverySchemeAllocateNothing) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto scheme : {DistributionScheme::Replicated, DistributionScheme::Zero, DistributionScheme::LocalShards}) {
    for (double limit : {0.0, 1.0}) {
      SCOPED_TRACE(to_string(scheme) + (limit > 0 ? ", within a workspace limit" : ", no workspace limit"));
      testing::on_gloo_ranks(2, DistributedOptions().scheme(scheme), [&](int64_t rank, DistributedContext& context) {
        auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
        std::vector<at::Tensor> params;
        for (const auto& shape : std::vector<std::vector<int64_t>>{{64, 48}, {40, 37}, {32}}) {
          params.push_back(at::randn(shape, generator).set_requires_grad(true));
        }
        Dash optimizer(params, DashOptions(1e-3).block_size(16).start_step(2).root_frequency(4).workspace_limit(limit),
            std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
        for (int64_t step = 1; step <= 9; ++step) {
          // The same gradients on every rank (Replicated's must agree).
          auto gradients = at::make_generator<at::CPUGeneratorImpl>(100 + step);
          for (auto& p : params) p.mutable_grad() = at::randn(p.sizes(), gradients);
          CountAllocations counter(1, c10::DeviceType::CPU);
          counter.count_only_this_thread();
          optimizer.step();
          const bool root_step = step >= 2 && (step - 2) % 4 == 0;
          if (step >= 4 && !root_step) {
            // (SCOPED_TRACE is the main thread's: the rank's message names the case.)
            EXPECT_EQ(counter.reporter().count, 0) << to_string(scheme) << ", workspace limit " << limit << ", rank "
                                                   << rank << ", step " << step << " allocated, by site:\n"
                                                   << counter.reporter().sites();
          }
        }
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, NonRootStepTest,
    ::testing::Combine(
        ::testing::ValuesIn(std::vector<RootMethod>(std::begin(kSolverMethods), std::end(kSolverMethods))),
        ::testing::Values(c10::DeviceType::CPU, c10::DeviceType::CUDA)),
    [](const ::testing::TestParamInfo<std::tuple<RootMethod, c10::DeviceType>>& info) {
      return to_string(std::get<0>(info.param)) + (std::get<1>(info.param) == c10::DeviceType::CUDA ? "_cuda" : "_cpu");
    });

// bfloat16 preconditioning keeps its rounded Ĝ, L̄ Ĝ and roots across steps: after
// the first steps, a non-root step allocates nothing the size of a block, and
// every step allocates as many tensors as the same kind of step before it.
TEST(StepAllocations, BFloat16PreconditioningReusesItsBuffers) {
  const auto steps = allocations_per_step(
      dash::testing::solver_options(RootMethod::EVD), 10, at::Device(at::kCPU), MatmulPrecision::BF16);
  std::cout << describe(steps);
  for (size_t i = 5; i < steps.size(); ++i) {
    if (i % 4 != 0) EXPECT_LT(steps[i].largest, 16 * 16 * 2) << "step " << i + 1;  // a bfloat16 block
    EXPECT_EQ(steps[i].count, steps[i - 4].count) << "step " << i + 1;
  }
}

// The solver alone, in every precision: with a warm workspace the iterations
// allocate nothing per step — dash's code, that is: LibTorch's CPU bf16 bmm
// (oneDNN) takes a scratch of its own per call (LibTorch 1.13: about a quarter of
// one 256² bf16 matrix), which the counter books apart (in_matmul) and the test
// prints.
TEST(SolverAllocations, WarmWorkspaceIterationsAllocateNoMatrices) {
  const int64_t b = 32;
  auto matrices = testing::log_spaced_spectrum(6, b, 1e3, 3).matrices.to(at::kFloat);
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16, MatmulPrecision::FP16}) {
    for (auto method : dash::testing::matmul_solvers()) {
      InverseRootWorkspace workspace;
      auto options = dash::testing::solver_options(method).precision(precision);
      // Warmed with the longest run: a longer iteration can hold one more iterate.
      auto with_steps = [&](int64_t steps) {
        return InverseRootOptions(options)
            .newton(NewtonOptions().steps(steps))
            .chebyshev(ChebyshevOptions().degree(steps));
      };
      (void)inverse_root(matrices, 4, with_steps(20), workspace);
      std::vector<int64_t> counts;
      std::vector<int64_t> large;
      for (int64_t steps : {3, 9, 20}) {
        CountAllocations counter(/*large_bytes=*/2 * b * b * 4);
        auto root = inverse_root(matrices, 4, with_steps(steps), workspace);
        counts.push_back(counter.reporter().count);
        large.push_back(counter.reporter().large);
        if (counter.reporter().in_matmul > 0) {
          std::cout << "method " << static_cast<int>(method) << ", precision " << static_cast<int>(precision) << ", "
                    << steps << " steps: " << counter.reporter().in_matmul
                    << " allocations inside the backend's matmul kernels\n";
        }
        EXPECT_TRUE(root.isfinite().all().item<bool>());
      }
      const auto label = "method " + std::to_string(static_cast<int>(method)) + ", precision " +
                         std::to_string(static_cast<int>(precision));
      EXPECT_EQ(large[0], large[1]) << label;
      EXPECT_EQ(large[0], large[2]) << label;
      EXPECT_EQ(counts[0], counts[1]) << label;
      EXPECT_EQ(counts[0], counts[2]) << label;
    }
  }
}

// Roots from a reused workspace are bitwise those of fresh calls, and a root the
// caller still holds is not overwritten by the next call.
TEST(SolverAllocations, WorkspaceResultsAreIndependentOfReuse) {
  auto first = testing::log_spaced_spectrum(4, 24, 1e2, 1).matrices.to(at::kFloat);
  auto second = testing::log_spaced_spectrum(4, 24, 1e4, 2).matrices.to(at::kFloat);
  InverseRootWorkspace workspace;
  auto options = dash::testing::solver_options(RootMethod::NewtonDB);
  auto held = inverse_root(first, 4, options, workspace);
  auto held_copy = held.clone();
  auto next = inverse_root(second, 4, options, workspace);
  EXPECT_TRUE(at::equal(held, held_copy));
  EXPECT_TRUE(at::equal(held, inverse_root(first, 4, options)));
  EXPECT_TRUE(at::equal(next, inverse_root(second, 4, options)));
  EXPECT_GT(workspace.bytes(), 0);
}

}  // namespace
}  // namespace dash
