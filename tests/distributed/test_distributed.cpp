// Distributed DASH on loopback Gloo, 2 and 3 local ranks (distributed_worker),
// against single-process DASH on the same gradients.

#include "distributed/distributed_problem.h"
#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/temporary_folder.h"

#include "local_launch.h"

#include <dash/distributed.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dash {
namespace {

using ::testing::HasSubstr;

// Every launch ends within this (the worker's own collective timeout is 20 s).
constexpr auto kLaunchTimeout = std::chrono::seconds(120);

using OutputFolder = testing::TemporaryFolder;

int launch(const std::string& scenario, int64_t ranks, const OutputFolder& out) {
  return launch::launch_local_ranks(
      {DASH_DISTRIBUTED_WORKER, scenario, out.path()}, ranks, std::chrono::seconds(30), kLaunchTimeout);
}

std::vector<at::Tensor> load_parameters(const std::string& path) {
  std::vector<at::Tensor> values;
  torch::load(values, path);
  return values;
}

struct SingleProcess {
  std::vector<at::Tensor> initial, final;
  int64_t state_bytes = 0;
};

SingleProcess single_process(bool tiny, double workspace_limit = DashOptions().workspace_limit()) {
  SingleProcess result;
  auto params = testing::distributed_problem_parameters(tiny);
  for (const auto& param : params) result.initial.push_back(param.detach().clone());
  Dash optimizer(params, testing::distributed_problem_options().workspace_limit(workspace_limit));
  for (int64_t step = 0; step < testing::kDistributedProblemSteps; ++step) {
    testing::set_distributed_problem_gradients(params, step);
    optimizer.step();
  }
  for (const auto& param : params) result.final.push_back(param.detach().clone());
  result.state_bytes = optimizer.state_bytes();
  return result;
}

std::pair<int64_t, int64_t> stats(const OutputFolder& out, int64_t rank) {
  std::ifstream in(out.file("stats-rank" + std::to_string(rank) + ".txt"));
  int64_t state_bytes = -1, communicated = -1;
  in >> state_bytes >> communicated;
  return {state_bytes, communicated};
}

/// Largest |a − b| / max(|b|, 1e-3) over all parameters.
double max_relative_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, ((a[i] - b[i]).abs() / b[i].abs().clamp_min(1e-3)).max().item<double>());
  }
  return worst;
}

void expect_ranks_identical(const OutputFolder& out, int64_t ranks, const std::vector<at::Tensor>& rank0) {
  for (int64_t rank = 1; rank < ranks; ++rank) {
    const auto other = load_parameters(out.file("params-rank" + std::to_string(rank) + ".pt"));
    ASSERT_EQ(other.size(), rank0.size());
    for (size_t i = 0; i < other.size(); ++i)
      EXPECT_TRUE(at::equal(other[i], rank0[i])) << "rank " << rank << " param " << i;
  }
}

class DistributedDash : public ::testing::TestWithParam<int64_t> {};

TEST_P(DistributedDash, TenStepsEqualSingleProcessDashOnTheSameGradients) {
  DASH_SKIP_WITHOUT_GLOO();
  const int64_t ranks = GetParam();
  OutputFolder out;
  ASSERT_EQ(launch("match", ranks, out), 0);
  const auto reference = single_process(false);
  const auto distributed = load_parameters(out.file("params-rank0.pt"));
  ASSERT_EQ(distributed.size(), reference.final.size());
  expect_ranks_identical(out, ranks, distributed);
  EXPECT_LE(max_relative_difference(distributed, reference.final), 1e-6);
  // Per block the arithmetic is the same as in one process (only the batch it
  // runs in differs), so the results are bitwise equal on this CPU.
  for (size_t i = 0; i < distributed.size(); ++i) EXPECT_TRUE(at::equal(distributed[i], reference.final[i])) << i;
  for (size_t i = 0; i < distributed.size(); ++i) EXPECT_FALSE(at::equal(distributed[i], reference.initial[i])) << i;

  // The state is partitioned: the shares add up to the single-process state (up to
  // one 8-byte failure counter per factor stack, which each rank keeps for its own
  // stacks), and each is well below it. Every rank receives the others' updates.
  int64_t total = 0;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const auto [state_bytes, communicated] = stats(out, rank);
    total += state_bytes;
    EXPECT_LT(state_bytes, reference.state_bytes * 3 / 4) << "rank " << rank;
    EXPECT_GT(communicated, 0);
  }
  EXPECT_GE(total, reference.state_bytes);
  EXPECT_LE(total, reference.state_bytes + 8 * 4 * ranks);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistributedDash, ::testing::Values(2, 3));

// Within a workspace limit of one byte every chunk is one block or factor, on each
// rank as in one process: each root is then computed alone wherever it lives, and
// the ranks' parameters are bitwise those of one process with the same limit.
TEST(DistributedDashEdges, ChunkedRanksEqualAChunkedSingleProcess) {
  DASH_SKIP_WITHOUT_GLOO();
  OutputFolder out;
  ASSERT_EQ(launch("chunked", 2, out), 0);
  const auto reference = single_process(false, /*workspace_limit=*/1.0);
  const auto distributed = load_parameters(out.file("params-rank0.pt"));
  ASSERT_EQ(distributed.size(), reference.final.size());
  expect_ranks_identical(out, 2, distributed);
  for (size_t i = 0; i < distributed.size(); ++i) EXPECT_TRUE(at::equal(distributed[i], reference.final[i])) << i;
  for (size_t i = 0; i < distributed.size(); ++i) EXPECT_FALSE(at::equal(distributed[i], reference.initial[i])) << i;
}

TEST(DistributedDashEdges, MoreRanksThanBlocksLeavesSomeRanksIdle) {
  DASH_SKIP_WITHOUT_GLOO();
  OutputFolder out;
  ASSERT_EQ(launch("tiny", 3, out), 0);  // one block and one AdamW segment: rank 2 owns nothing
  const auto reference = single_process(true);
  const auto distributed = load_parameters(out.file("params-rank0.pt"));
  expect_ranks_identical(out, 3, distributed);
  EXPECT_LE(max_relative_difference(distributed, reference.final), 1e-6);
  int64_t idle = 0;
  for (int64_t rank = 0; rank < 3; ++rank) idle += stats(out, rank).first == 0;
  EXPECT_EQ(idle, 1);
}

TEST(DistributedDashEdges, Bf16CommunicationStaysWithinOnePercentOfTheUpdate) {
  DASH_SKIP_WITHOUT_GLOO();
  // bf16 keeps 8 significant bits: each exchanged update is off by ≤ 2⁻⁹ relative,
  // so the summed update of 10 steps is within 1 % of the fp32 one.
  OutputFolder out;
  ASSERT_EQ(launch("bf16", 2, out), 0);
  const auto reference = single_process(false);
  const auto distributed = load_parameters(out.file("params-rank0.pt"));
  expect_ranks_identical(out, 2, distributed);
  for (size_t i = 0; i < distributed.size(); ++i) {
    const auto update = (reference.final[i] - reference.initial[i]).norm().item<double>();
    const auto error = (distributed[i] - reference.final[i]).norm().item<double>();
    EXPECT_LE(error, 1e-2 * update) << "param " << i;
    EXPECT_GT(error, 0.0) << "param " << i << ": bf16 rounding should be visible";
  }
  // Half the bytes of fp32.
  OutputFolder fp32;
  ASSERT_EQ(launch("match", 2, fp32), 0);
  EXPECT_EQ(stats(out, 0).second * 2, stats(fp32, 0).second);
}

TEST(DistributedDashEdges, EachRankResumesFromItsOwnShard) {
  DASH_SKIP_WITHOUT_GLOO();
  OutputFolder out;
  ASSERT_EQ(launch("resume", 2, out), 0);
  const auto reference = single_process(false);
  const auto distributed = load_parameters(out.file("params-rank0.pt"));
  expect_ranks_identical(out, 2, distributed);
  for (size_t i = 0; i < distributed.size(); ++i) EXPECT_TRUE(at::equal(distributed[i], reference.final[i])) << i;

  // A shard does not load into a different world size.
  auto params = testing::distributed_problem_parameters(false);
  Dash single(params, testing::distributed_problem_options());
  EXPECT_THAT(testing::error_of([&] { torch::load(single, out.file("optimizer-rank0.pt")); }),
      HasSubstr("holds the optimizer state of one of 2 ranks, this optimizer runs on a single process"));
}

TEST(DistributedDashEdges, ARankThatDiesMakesTheOthersFailWithAClearErrorInsteadOfHanging) {
  DASH_SKIP_WITHOUT_GLOO();
  OutputFolder out;
  const auto start = std::chrono::steady_clock::now();
  const int code = launch("exit", 3, out);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(code, 0);
  EXPECT_LT(seconds, 60.0);
  for (const int64_t rank : {0, 2}) {
    std::ifstream in(out.file("error-rank" + std::to_string(rank) + ".txt"));
    ASSERT_TRUE(in) << "rank " << rank << " was killed instead of failing by itself";
    std::stringstream message;
    message << in.rdbuf();
    EXPECT_THAT(message.str(), HasSubstr("failed (a rank exited, hung, or took longer than the timeout of"))
        << "rank " << rank;
  }
}

TEST(DistributedEnvironment, MalformedVariablesAreNamed) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "two", 1);
  EXPECT_THAT(testing::error_of([] { rank_environment(); }), HasSubstr("WORLD_SIZE='two'"));
  ::setenv("WORLD_SIZE", "2", 1);
  ::unsetenv("MASTER_PORT");
  EXPECT_THAT(testing::error_of([] { rank_environment(); }), HasSubstr("MASTER_PORT is not set"));
  ::setenv("MASTER_PORT", "29500", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  const auto environment = rank_environment();
  ASSERT_TRUE(environment.has_value());
  EXPECT_EQ(environment->rank, 1);
  EXPECT_EQ(environment->world_size, 2);
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_PORT", "MASTER_ADDR"}) ::unsetenv(name);
  EXPECT_FALSE(rank_environment().has_value());
}

}  // namespace
}  // namespace dash
