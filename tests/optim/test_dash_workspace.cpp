// DashOptions::workspace_limit: the budget's arithmetic, steps over chunks that
// are bit for bit the steps over whole stacks (on a CPU every block's and every
// factor's arithmetic is its own), and the memory a step holds, measured by the
// allocators' hook, within the limit.

#include <dash/optimizer.h>

#include "kernels/scratch.h"
#include "optim/rows.h"
#include "optim/workspace_budget.h"
#include "support/error_message.h"
#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace dash {
namespace {

using optim::items_per_chunk;
using optim::split_into_chunks;
using optim::workspace_budget;

TEST(WorkspaceBudget, ResolvesFractionsBytesAndNoLimit) {
  const int64_t state = int64_t{1} << 30;
  EXPECT_EQ(workspace_budget(0.0, state).limit, 0);
  EXPECT_FALSE(workspace_budget(0.0, state).bounded());
  EXPECT_EQ(workspace_budget(0.1, state).limit, static_cast<int64_t>(0.1 * static_cast<double>(state)));
  EXPECT_EQ(workspace_budget(0.1, 1000).limit, kWorkspaceFloorBytes) << "a fraction of a small state: the floor";
  EXPECT_EQ(workspace_budget(1.0, state).limit, 1) << "from 1 on, bytes: no floor";
  EXPECT_EQ(workspace_budget(5e6, state).limit, 5000000);
  EXPECT_THROW(workspace_budget(-1.0, state), c10::Error);
  EXPECT_THROW(workspace_budget(std::nan(""), state), c10::Error);
  EXPECT_EQ(optim::largest_budget({workspace_budget(1e6, state), workspace_budget(2e6, state)}).limit, 2000000);
  EXPECT_FALSE(optim::largest_budget({workspace_budget(1e6, state), workspace_budget(0.0, state)}).bounded());
}

TEST(WorkspaceBudget, SharesTheLimitInHalves) {
  const optim::WorkspaceBudget budget{1001};
  EXPECT_EQ(budget.roots(), 500);
  EXPECT_EQ(budget.blocks(), 500);
  EXPECT_EQ((optim::WorkspaceBudget{1}.roots()), 1) << "at least a byte: chunks of one, not no limit";
  EXPECT_EQ(optim::WorkspaceBudget{}.roots(), 0);
}

TEST(WorkspaceBudget, ChunksFitTheBudgetAndHoldAtLeastOneItem) {
  EXPECT_EQ(items_per_chunk(10, 100, 50, 0), 10) << "no limit: everything at once";
  EXPECT_EQ(items_per_chunk(10, 100, 50, 350), 3);
  EXPECT_EQ(items_per_chunk(10, 100, 50, 10000), 10);
  EXPECT_EQ(items_per_chunk(10, 100, 50, 120), 1) << "less than one item fits: one";
  EXPECT_EQ(items_per_chunk(10, 100, 500, 120), 1) << "the fixed part alone is over: one";
  const auto chunks = split_into_chunks({3, 4, 5, 9, 11, 12, 13}, 3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0], (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(chunks[1], (std::vector<int64_t>{9, 11, 12}));
  EXPECT_EQ(chunks[2], (std::vector<int64_t>{13}));
  EXPECT_TRUE(split_into_chunks({}, 2).empty());
  EXPECT_THROW(split_into_chunks({1}, 0), c10::Error);
}

// The runs a partial stack is worked in (slices, no index tensor): hand-worked,
// and on a random ascending list, the runs laid end to end give the list back.
TEST(Rows, ConsecutiveRunsCoverTheListInOrder) {
  const auto runs = optim::consecutive_runs({3, 4, 5, 9, 11, 12, 13});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ((std::vector<int64_t>{runs[0].position, runs[0].block, runs[0].length}), (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ((std::vector<int64_t>{runs[1].position, runs[1].block, runs[1].length}), (std::vector<int64_t>{3, 9, 1}));
  EXPECT_EQ((std::vector<int64_t>{runs[2].position, runs[2].block, runs[2].length}), (std::vector<int64_t>{4, 11, 3}));
  EXPECT_TRUE(optim::consecutive_runs({}).empty());
  auto generator = at::make_generator<at::CPUGeneratorImpl>(17);
  const auto keep = at::rand({200}, generator) < 0.7;
  std::vector<int64_t> blocks;
  for (int64_t b = 0; b < 200; ++b) {
    if (keep[b].item<bool>()) blocks.push_back(b);
  }
  std::vector<int64_t> laid_out;
  for (const auto& run : optim::consecutive_runs(blocks)) {
    EXPECT_EQ(run.position, static_cast<int64_t>(laid_out.size()));
    for (int64_t i = 0; i < run.length; ++i) laid_out.push_back(run.block + i);
  }
  EXPECT_EQ(laid_out, blocks);
}

// What each chunk's Rows take of a stacked tensor whose block b holds the value b:
// the chunk's blocks, in order, whether a chunk is the whole stack, a range, runs
// of a chunk with a gap, or a subset of a scattered chunk.
std::vector<std::vector<int64_t>> taken_blocks(const std::vector<optim::Rows>& chunks, int64_t stack_count) {
  const auto stack = at::arange(stack_count, at::kLong).view({stack_count, 1, 1});
  std::vector<std::vector<int64_t>> taken;
  for (const auto& rows : chunks) {
    const auto part = rows.take(stack).reshape(-1);
    taken.emplace_back(part.data_ptr<int64_t>(), part.data_ptr<int64_t>() + part.numel());
    EXPECT_EQ(taken.back(), rows.blocks());
  }
  return taken;
}

TEST(Rows, ChunksWithAFewGapsAreRunsOfSlicesAndScatteredOnesSubsets) {
  const c10::Device cpu(at::kCPU);
  at::Tensor indices;  // kept across the calls, as a stack's
  using Blocks = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(taken_blocks(optim::chunk_rows({0, 1, 2, 3}, 4, 10, cpu, indices), 4), (Blocks{{0, 1, 2, 3}}));
  EXPECT_EQ(taken_blocks(optim::chunk_rows({2, 3, 4}, 8, 10, cpu, indices), 8), (Blocks{{2, 3, 4}}));
  // A parameter without a gradient leaves a gap: two runs, each a slice (a view of the stack).
  const auto gap = optim::chunk_rows({0, 1, 2, 6, 7}, 8, 10, cpu, indices);
  EXPECT_EQ(taken_blocks(gap, 8), (Blocks{{0, 1, 2}, {6, 7}}));
  const auto stack = at::zeros({8, 1, 1});
  for (const auto& rows : gap) EXPECT_TRUE(rows.take(stack).is_alias_of(stack));
  // Chunks of 3 first, then runs within each chunk.
  EXPECT_EQ(
      taken_blocks(optim::chunk_rows({0, 1, 2, 6, 7, 9}, 10, 3, cpu, indices), 10), (Blocks{{0, 1, 2}, {6, 7}, {9}}));
  // More runs than kMostRunsPerChunk: one subset, gathered by index (a copy).
  std::vector<int64_t> scattered;
  for (int64_t b = 0; b <= 2 * optim::kMostRunsPerChunk; b += 2) scattered.push_back(b);
  const auto subset = optim::chunk_rows(scattered, 2 * optim::kMostRunsPerChunk + 1, 100, cpu, indices);
  EXPECT_EQ(taken_blocks(subset, 2 * optim::kMostRunsPerChunk + 1), (Blocks{scattered}));
  const auto scattered_stack = at::zeros({2 * optim::kMostRunsPerChunk + 1, 1, 1});
  EXPECT_FALSE(subset.front().take(scattered_stack).is_alias_of(scattered_stack));
  // The engine's way: the copy in a scratch buffer (the same blocks), and the next
  // step's indices in the same kept buffer.
  const auto numbered = at::arange(2 * optim::kMostRunsPerChunk + 1, at::kLong).view({-1, 1, 1});
  kernels::Scratch scratch;
  const auto part = subset.front().take(numbered, &scratch);
  EXPECT_TRUE(at::equal(part.view(-1), at::tensor(scattered, at::kLong)));
  EXPECT_EQ(scratch.buffers(), 1u);
  const auto* kept = indices.data_ptr<int64_t>();
  for (auto& block : scattered) ++block;
  const auto next = optim::chunk_rows(scattered, 2 * optim::kMostRunsPerChunk + 2, 100, cpu, indices);
  EXPECT_EQ(taken_blocks(next, 2 * optim::kMostRunsPerChunk + 2), (Blocks{scattered}));
  EXPECT_EQ(indices.data_ptr<int64_t>(), kept);
}

// A model of ragged shapes for B = 8 · scale: matrices that tile and that do not,
// a 4-D weight, a one-row matrix, 1-D and 0-D parameters; parameter 1 has no
// gradient in some steps, so its blocks are a scattered subset of their stacks then.
std::vector<at::Tensor> model_parameters(int64_t scale = 1) {
  auto generator = at::detail::createCPUGenerator(11);
  std::vector<at::Tensor> params = {at::randn({40 * scale, 37 * scale}, generator),
      at::randn({24 * scale, 16 * scale}, generator), at::randn({5 * scale, 3, 2, 2}, generator),
      at::randn({1, 30 * scale}, generator), at::randn({13 * scale}, generator), at::randn({}, generator)};
  for (auto& p : params) p.set_requires_grad(true);
  return params;
}

void give_gradients(std::vector<at::Tensor>& params, int step, at::Generator& generator) {
  for (size_t i = 0; i < params.size(); ++i) {
    const bool skipped = i == 1 && step % 3 == 2;
    params[i].mutable_grad() =
        skipped ? at::Tensor() : params[i].detach() * 0.3 + at::randn(params[i].sizes(), generator);
  }
}

// Two twins, one without a limit and one with `limit` from step `from` on,
// stepped on the same gradients; `compare(step, whole, chunked)` after every step.
template <typename Compare>
void step_twins(const DashOptions& options, double limit, int from, int steps, const Compare& compare) {
  const auto scale = options.block_size() / 8;
  auto whole = model_parameters(scale);
  auto chunked = model_parameters(scale);
  Dash whole_optimizer(whole, DashOptions(options).workspace_limit(0.0));
  Dash chunked_optimizer(chunked, DashOptions(options).workspace_limit(from == 0 ? limit : 0.0));
  auto generator = at::detail::createCPUGenerator(5);
  for (int step = 0; step < steps; ++step) {
    if (step == from) {
      for (auto& group : chunked_optimizer.param_groups()) {
        static_cast<DashOptions&>(group.options()).workspace_limit(limit);
      }
    }
    auto generator_copy = generator.clone();
    give_gradients(whole, step, generator);
    give_gradients(chunked, step, generator_copy);
    whole_optimizer.step();
    chunked_optimizer.step();
    compare(step, whole, chunked);
  }
  EXPECT_GT(chunked_optimizer.diagnostics().workspace_limit_bytes, 0);
  EXPECT_LT(chunked_optimizer.diagnostics().workspace_bytes, whole_optimizer.diagnostics().workspace_bytes);
}

struct Variant {
  std::string label;
  DashOptions options;
};

std::vector<Variant> variants() {
  const auto base =
      DashOptions(0.01).block_size(8).start_step(2).root_frequency(2).momentum(0.5).weight_decay(0.1).execution(
          Execution::Batched);
  std::vector<Variant> result;
  for (auto method : kSolverMethods) {
    result.push_back({"method " + to_string(method), DashOptions(base).root(testing::solver_options(method))});
  }
  result.push_back({"ndb by eigh", DashOptions(base).root(InverseRootOptions().method(RootMethod::NewtonDB))});
  auto warm = InverseRootOptions().method(RootMethod::EVD);
  warm.eigen().refresh_tolerance(0.05);
  result.push_back({"warm evd", DashOptions(base).root(warm)});
  // LibTorch's CPU bfloat16 bmm (oneDNN) rounds 8 × 8 products of a stack apart
  // from the same product alone (from 64 × 64 on it does not): B = 64 here.
  const auto bf16 = DashOptions(base).block_size(64);
  result.push_back({"bf16 roots",
      DashOptions(bf16).root(testing::solver_options(RootMethod::CoupledNewton).precision(MatmulPrecision::BF16))});
  result.push_back({"bf16 preconditioning", DashOptions(bf16).preconditioning_precision(MatmulPrecision::BF16)});
  const auto bf16_state = [](const DashOptions& o) {
    return DashOptions(o)
        .factor_precision(MatmulPrecision::BF16)
        .root_precision(MatmulPrecision::BF16)
        .moment_precision(MatmulPrecision::BF16);
  };
  result.push_back({"bf16 state", bf16_state(base)});
  result.push_back(
      {"bf16 state and preconditioning", bf16_state(bf16).preconditioning_precision(MatmulPrecision::BF16)});
  result.push_back({"1-d shampoo, no momentum, sgd grafting",
      DashOptions(base).one_dimensional(OneDimensional::Shampoo1D).momentum(0.0).grafting(GraftingType::SGD)});
  result.push_back({"sequential", DashOptions(base).execution(Execution::Sequential)});
  result.push_back({"execution auto", DashOptions(base).execution(Execution::Auto)});
  return result;
}

// Steps without new roots (f = 1000: the roots of step 2 kept, computed by both
// twins over whole stacks) are bit for bit the same over chunks as over whole
// stacks, with a limit of one byte (chunks of one block) and of a few blocks: on
// a CPU every block's gather, factor update, grafting, preconditioning and
// write-back is its own arithmetic, and the per-block bias corrections are
// computed over whole stacks.
TEST(WorkspaceLimit, StepsWithoutRootsAreBitwiseTheWholeStacksSteps) {
  for (const auto& variant : variants()) {
    for (double limit : {1.0, 12e3 * std::pow(variant.options.block_size() / 8, 2)}) {
      step_twins(DashOptions(variant.options).root_frequency(1000), limit, /*from=*/2, 9,
          [&](int step, const auto& whole, const auto& chunked) {
            for (size_t i = 0; i < whole.size(); ++i) {
              ASSERT_TRUE(at::equal(whole[i], chunked[i]))
                  << variant.label << ", limit " << limit << ": parameter " << i << " differs after step " << step + 1;
            }
          });
    }
  }
}

// Roots computed over chunks can differ from the whole stack's in the last bits
// on a CPU: an element-wise power (the unscaling of every method, EVD's and
// NewtonDB-by-eigh's eigenvalue function) runs in SIMD lanes or in a loop's
// scalar tail depending on where a matrix sits in its stack, and Chebyshev's
// coefficients come from a product whose blocking depends on the stack's size.
// After 9 steps with 4 root computations the parameters agree to 1e-5 of their
// norm; a wrong root is off by O(1).
TEST(WorkspaceLimit, StepsWithRootsAgreeWithTheWholeStacksSteps) {
  for (const auto& variant : variants()) {
    for (double limit : {1.0, 12e3 * std::pow(variant.options.block_size() / 8, 2)}) {
      step_twins(variant.options, limit, /*from=*/0, 9, [&](int step, const auto& whole, const auto& chunked) {
        for (size_t i = 0; i < whole.size(); ++i) {
          const double norm = whole[i].norm().template item<double>();
          const double difference = (whole[i] - chunked[i]).norm().template item<double>();
          EXPECT_LE(difference, 1e-5 * norm)
              << variant.label << ", limit " << limit << ": parameter " << i << " after step " << step + 1;
        }
      });
    }
  }
}

// RootMethod::Auto compares the methods on a chunk of the due factors within a
// limit; whatever it chooses, the step stays within bounds and finite.
TEST(WorkspaceLimit, AutoRootMethodChoosesWithinALimit) {
  auto params = model_parameters();
  Dash optimizer(params, DashOptions(0.01)
                             .block_size(8)
                             .start_step(1)
                             .root(InverseRootOptions().method(RootMethod::Auto))
                             .workspace_limit(20e3));
  auto generator = at::detail::createCPUGenerator(2);
  for (int step = 0; step < 3; ++step) {
    give_gradients(params, step, generator);
    optimizer.step();
  }
  for (const auto& stack : optimizer.diagnostics().factor_stacks) {
    EXPECT_NE(stack.root_method, RootMethod::Auto) << stack.size << "² stack: a method was chosen";
    EXPECT_EQ(stack.root_method_trials.size(), 4u);
  }
  for (const auto& p : params) EXPECT_TRUE(p.isfinite().all().item<bool>());
}

// A model for the memory checks: three matrices of 12 × 8 blocks of B × B (B from
// the options) and a vector.
std::vector<at::Tensor> memory_model(const DashOptions& options) {
  auto generator = at::detail::createCPUGenerator(3);
  const int64_t side = 2 * options.block_size();
  std::vector<at::Tensor> params;
  for (int i = 0; i < 3; ++i) params.push_back(at::randn({6 * side, 4 * side}, generator).set_requires_grad(true));
  params.push_back(at::randn({4 * side}, generator).set_requires_grad(true));
  return params;
}

// Steps `optimizer` with memory profiling, and expects the memory each step holds
// besides the state within `limit`: what it kept from the steps before
// (workspace_bytes when it began) plus the peak of what it allocates
// (step_peak_bytes: buffers it adds included, state it adds not), less the
// buffers the limit does not divide. `has_gradient(step, i)`: whether parameter i
// has one in that step (unset: all, always).
void expect_steps_within(Dash& optimizer, std::vector<at::Tensor>& params, double limit, int steps,
    const std::string& label, const std::function<bool(int, size_t)>& has_gradient = nullptr) {
  optimizer.profile_memory(true);
  auto before = optimizer.diagnostics();
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const bool has = !has_gradient || has_gradient(step, i);
      params[i].mutable_grad() = has ? at::randn_like(params[i]) : at::Tensor();
    }
    optimizer.step();
    const auto after = optimizer.diagnostics();
    ASSERT_GE(after.step_peak_bytes, 0) << "measured";
    // State the step allocated (warm EVD's eigenvectors at the first root computation) is not workspace.
    const auto state_added = after.state_bytes - before.state_bytes;
    const auto held = before.workspace_bytes - before.unchunked_workspace_bytes + after.step_peak_bytes - state_added;
    EXPECT_LE(held, static_cast<int64_t>(limit))
        << label << ", step " << step + 1 << ": kept " << before.workspace_bytes << " (unchunked "
        << before.unchunked_workspace_bytes << "), peak " << after.step_peak_bytes << ", state added " << state_added;
    before = after;
  }
}

// Within a limit that is a quarter of the unbounded workspace, for every method,
// root steps included.
TEST(WorkspaceLimit, MeasuredStepMemoryStaysWithinTheLimit) {
  for (const auto& variant : variants()) {
    if (variant.options.execution() == Execution::Auto) continue;  // its one-off timing solves blocks apart
    auto params = memory_model(variant.options);
    Dash unbounded(params, DashOptions(variant.options).workspace_limit(0.0));
    for (int step = 0; step < 3; ++step) {
      for (auto& p : params) p.mutable_grad() = at::randn_like(p);
      unbounded.step();
    }
    const double limit = 0.25 * static_cast<double>(unbounded.diagnostics().workspace_bytes);
    Dash optimizer(params, DashOptions(variant.options).workspace_limit(limit));
    expect_steps_within(optimizer, params, limit, 6, variant.label);
  }
}

// Steps where every other one of ten single-block matrices has no gradient: their
// blocks with one are scattered through the stack they share with the model's
// (more than kMostRunsPerChunk runs), so chunks of them are subsets, gathered into
// the scratch. Those steps keep within the limit too.
TEST(WorkspaceLimit, StepsWithScatteredBlocksStayWithinTheLimit) {
  const auto options = DashOptions(0.01).block_size(8).start_step(1).root_frequency(2).execution(Execution::Batched);
  auto params = memory_model(options);
  const auto first_single = params.size();
  auto generator = at::detail::createCPUGenerator(4);
  for (int i = 0; i < 10; ++i) params.push_back(at::randn({8, 8}, generator).set_requires_grad(true));
  auto has_gradient = [&](int step, size_t i) {
    return step % 2 == 0 || i < first_single || (i - first_single) % 2 == 0;
  };
  Dash unbounded(params, DashOptions(options).workspace_limit(0.0));
  for (int step = 0; step < 3; ++step) {
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    unbounded.step();
  }
  const double limit = 0.25 * static_cast<double>(unbounded.diagnostics().workspace_bytes);
  Dash optimizer(params, DashOptions(options).workspace_limit(limit));
  expect_steps_within(optimizer, params, limit, 6, "scattered", has_gradient);
}

// A limit set (or lowered) after steps without one: the buffers those steps made
// for whole stacks are released, and the steps after it keep within it.
TEST(WorkspaceLimit, ALimitSetLaterReleasesTheWholeStacksBuffers) {
  const auto options = DashOptions(0.01).block_size(8).start_step(1).root_frequency(2).execution(Execution::Batched);
  auto params = memory_model(options);
  Dash optimizer(params, DashOptions(options).workspace_limit(0.0));
  for (int step = 0; step < 3; ++step) {
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    optimizer.step();
  }
  const auto whole = optimizer.diagnostics().workspace_bytes;
  const double limit = 0.25 * static_cast<double>(whole);
  for (auto& group : optimizer.param_groups()) static_cast<DashOptions&>(group.options()).workspace_limit(limit);
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  optimizer.step();
  EXPECT_LE(optimizer.diagnostics().workspace_bytes - optimizer.diagnostics().unchunked_workspace_bytes,
      static_cast<int64_t>(limit));
  expect_steps_within(optimizer, params, limit, 4, "set later");
  // The step that lowers it begins with what the old limit allowed; from then on, the new one.
  for (auto& group : optimizer.param_groups()) static_cast<DashOptions&>(group.options()).workspace_limit(limit / 2);
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  optimizer.step();
  expect_steps_within(optimizer, params, limit / 2, 4, "lowered");
}

// RootMethod::Auto's trials, within a limit, run in the optimizer's workspace and
// leave no buffer of the methods not chosen there.
TEST(WorkspaceLimit, AutoRootMethodsTrialsStayWithinTheLimit) {
  const auto options = DashOptions(0.01)
                           .block_size(8)
                           .start_step(1)
                           .execution(Execution::Batched)
                           .root(InverseRootOptions().method(RootMethod::Auto));
  auto params = memory_model(options);
  Dash unbounded(params, DashOptions(options).workspace_limit(0.0));
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  unbounded.step();
  const double limit = 0.25 * static_cast<double>(unbounded.diagnostics().workspace_bytes);
  Dash optimizer(params, DashOptions(options).workspace_limit(limit));
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  optimizer.step();  // the trials; their float64 reference is a one-off beside them
  const auto after_trials = optimizer.diagnostics();
  EXPECT_LE(after_trials.workspace_bytes - after_trials.unchunked_workspace_bytes, static_cast<int64_t>(limit));
  expect_steps_within(optimizer, params, limit, 4, "after the trials");
}

TEST(WorkspaceLimit, DiagnosticsReportTheBudgetAndNoPeakUnlessProfiled) {
  auto params = model_parameters();
  Dash optimizer(params, DashOptions(0.01).block_size(8));
  auto generator = at::detail::createCPUGenerator(1);
  give_gradients(params, 0, generator);
  optimizer.step();
  auto diagnostics = optimizer.diagnostics();
  EXPECT_EQ(diagnostics.workspace_limit_bytes, kWorkspaceFloorBytes) << "0.1 of a small state: the floor";
  EXPECT_EQ(diagnostics.step_peak_bytes, -1);
  EXPECT_EQ(diagnostics.state_bytes, optimizer.state_bytes());
  EXPECT_GT(diagnostics.workspace_bytes, 0);
  optimizer.profile_memory(true);
  give_gradients(params, 1, generator);
  optimizer.step();
  EXPECT_GT(optimizer.diagnostics().step_peak_bytes, 0);
}

TEST(WorkspaceLimit, BadLimitsAreRefusedByName) {
  auto params = model_parameters();
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    const auto message = testing::error_of([&] { Dash optimizer(params, DashOptions().workspace_limit(bad)); });
    EXPECT_NE(message.find("workspace_limit"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace dash
