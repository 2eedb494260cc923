// The contract every distributor (src/optim/distributor.h) keeps, checked through
// dash::Dash on ranks run as threads (tests/support/gloo_threads.h), for every
// scheme and 1 to 3 ranks:
// - after ten steps the parameters are those of one process given the ranks'
//   average gradient, bitwise: per block the arithmetic is one process's, and the
//   average is rounded as the reference's stack(...).sum(0) / n is;
// - so on ragged blocks, within a workspace limit and without, with ranks that own
//   no block at all, and with float64 parameters (whose updates travel, rather than
//   the new values; not under Zero, which averages float32 copies of the gradients);
// - a parameter that some rank has no gradient for is averaged with zeros (Zero),
//   refused on every rank (Replicated, whose gradients must agree) or left as it was
//   on that rank (LocalShards, whose ranks step parameters of their own);
// - the ranks decide a step alike: a root failure limit reached on one rank's
//   factors, or a non-finite gradient that only one rank holds, stops or skips the
//   step on every rank;
// - a collective that fails leaves the parameters as they were.
// A new scheme adds its case to kSchemes.

#include "distributed/distributed_problem.h"
#include "distributed/scheme_runs.h"
#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/gloo_threads.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace dash {
namespace {

using testing::average_gradients;
using testing::expect_bitwise;
using ::testing::HasSubstr;
using testing::local_gradients;
using testing::on_ranks;
using testing::one_process;
using testing::Problem;

using Case = std::tuple<DistributionScheme, int64_t>;

class DistributorContract : public ::testing::TestWithParam<Case> {
 protected:
  DistributionScheme scheme() const { return std::get<0>(GetParam()); }
  int64_t ranks() const { return std::get<1>(GetParam()); }

  /// On each rank, an optimizer of the problem's parameters with `policy` and their
  /// first step's gradients, handed to `body(rank, params, optimizer)`.
  template <typename Body>
  void on_first_step_of_ranks(NonFiniteGradients policy, Body body) {
    testing::on_gloo_ranks(
        ranks(), DistributedOptions().scheme(scheme()), [&](int64_t rank, DistributedContext& context) {
          auto params = testing::distributed_problem_parameters(false);
          Dash optimizer(params, testing::distributed_problem_options().non_finite_gradients(policy),
              std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
          testing::set_distributed_problem_gradients(params, 0);
          body(rank, params, optimizer);
        });
  }
};

TEST_P(DistributorContract, RanksEqualOneProcessOnTheAverageGradient) {
  DASH_SKIP_WITHOUT_GLOO();
  // The default limit, none, and one byte: every chunk and every exchange round one piece.
  for (const double limit : {DashOptions().workspace_limit(), 0.0, 1.0}) {
    SCOPED_TRACE("workspace_limit " + std::to_string(limit));
    Problem run;
    run.workspace_limit = limit;
    const auto reference = one_process(run, ranks());
    expect_bitwise(on_ranks(scheme(), ranks(), run), reference);
    // The run moved the parameters: the comparison is not of untouched values.
    EXPECT_FALSE(at::equal(reference[0], testing::distributed_problem_parameters(false)[0]));
  }
}

// Unchecked gradients: the ranks still decide together every step (and so still
// agree on which parameters have gradients), and equal one process.
TEST_P(DistributorContract, UncheckedRanksEqualOneProcessOnTheAverageGradient) {
  DASH_SKIP_WITHOUT_GLOO();
  for (const double limit : {0.0, 1.0}) {
    SCOPED_TRACE("workspace_limit " + std::to_string(limit));
    Problem run;
    run.workspace_limit = limit;
    run.policy = NonFiniteGradients::Unchecked;
    expect_bitwise(on_ranks(scheme(), ranks(), run), one_process(run, ranks()));
  }
}

TEST_P(DistributorContract, Float64ParametersEqualOneProcessOnTheAverageGradient) {
  DASH_SKIP_WITHOUT_GLOO();
  // Zero averages float32 copies of the ranks' gradients (its all-to-all is float32),
  // where one process rounds their float64 average: the last bits differ.
  if (scheme() == DistributionScheme::Zero) GTEST_SKIP() << "float32 gradient exchange";
  for (const double limit : {DashOptions().workspace_limit(), 1.0}) {
    SCOPED_TRACE("workspace_limit " + std::to_string(limit));
    Problem run;
    run.dtype = at::kDouble;
    run.workspace_limit = limit;
    expect_bitwise(on_ranks(scheme(), ranks(), run), one_process(run, ranks()));
  }
}

TEST_P(DistributorContract, RanksWithoutBlocksStillTakePart) {
  DASH_SKIP_WITHOUT_GLOO();
  Problem run;
  run.tiny = true;  // one block and one AdamW segment: with 3 ranks one owns nothing
  expect_bitwise(on_ranks(scheme(), ranks(), run), one_process(run, ranks()));
}

TEST_P(DistributorContract, AParameterWithoutAGradientOnOneRank) {
  DASH_SKIP_WITHOUT_GLOO();
  if (ranks() < 2) GTEST_SKIP() << "one rank";
  Problem run;
  run.missing = 2;  // a matrix of 48 × 20, in blocks
  if (scheme() == DistributionScheme::Zero) {
    expect_bitwise(on_ranks(scheme(), ranks(), run), one_process(run, ranks()));
    return;
  }
  if (scheme() == DistributionScheme::LocalShards) {
    const auto results = on_ranks(scheme(), ranks(), run);
    const auto initial = testing::distributed_problem_parameters(false)[2];
    EXPECT_TRUE(at::equal(results[1][2], initial)) << "rank 1 had no gradient for it";
    EXPECT_FALSE(at::equal(results[0][2], initial)) << "rank 0 had one";
    return;
  }
  // Replicated: an error on every rank, with unchecked gradients too (the agreement
  // rides on the step's decision, which ranks always take).
  for (auto policy : {NonFiniteGradients::Error, NonFiniteGradients::Unchecked}) {
    SCOPED_TRACE(to_string(policy));
    std::mutex mutex;
    std::vector<std::string> errors;
    on_first_step_of_ranks(policy, [&](int64_t rank, std::vector<at::Tensor>& params, Dash& optimizer) {
      if (rank == 1) params[2].mutable_grad() = at::Tensor();
      const auto error = testing::error_of([&] { optimizer.step(); });
      const std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(error);
    });
    ASSERT_EQ(static_cast<int64_t>(errors.size()), ranks());
    for (const auto& error : errors) {
      EXPECT_THAT(error, HasSubstr("parameter 2 of shape [48, 20] has a gradient on some ranks and not on others"));
    }
  }
}

TEST_P(DistributorContract, AFailedCollectiveLeavesTheParametersAsTheyWere) {
  DASH_SKIP_WITHOUT_GLOO();
  if (ranks() < 2) GTEST_SKIP() << "one rank: no collective";
  std::vector<at::Tensor> before, after;
  std::string error;
  const auto options = DistributedOptions().scheme(scheme()).timeout(std::chrono::seconds(2));
  testing::on_gloo_ranks(ranks(), options, [&](int64_t rank, DistributedContext& context) {
    auto params = testing::distributed_problem_parameters(false);
    Dash optimizer(params, testing::distributed_problem_options(),
        std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
    if (rank != 0) return;  // the others never step: rank 0's first collective fails
    testing::set_distributed_problem_gradients(params, 0);
    for (const auto& param : params) before.push_back(param.detach().clone());
    error = testing::error_of([&] { optimizer.step(); });
    for (const auto& param : params) after.push_back(param.detach().clone());
  });
  EXPECT_THAT(error, HasSubstr("failed (a rank exited, hung, or took longer than the timeout of 2000 ms"));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("Exception raised from"))) << "the process group's C++ backtrace";
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(at::equal(after[i], before[i])) << "parameter " << i;
}

// Ranks whose workspace budgets differ (a budget is a fraction of a rank's own
// state, or, as here, set apart) exchange in the same rounds: the smallest bound
// wins. (Before the ranks agreed on it, such ranks ran collectives of different
// sizes and counts.)
TEST_P(DistributorContract, RanksWithDifferentWorkspaceBudgetsExchangeInTheSameRounds) {
  DASH_SKIP_WITHOUT_GLOO();
  if (ranks() < 2) GTEST_SKIP() << "one rank";
  if (scheme() == DistributionScheme::LocalShards) GTEST_SKIP() << "nothing is exchanged";
  std::vector<std::vector<at::Tensor>> results(static_cast<size_t>(ranks()));
  testing::on_gloo_ranks(ranks(), DistributedOptions().scheme(scheme()).timeout(std::chrono::seconds(20)),
      [&](int64_t rank, DistributedContext& context) {
        auto params = testing::distributed_problem_parameters(false);
        // Rank 0: rounds of one block; the others: one round.
        Dash optimizer(params, testing::distributed_problem_options().workspace_limit(rank == 0 ? 1.0 : 0.0),
            std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
        for (int64_t step = 0; step < testing::kDistributedProblemSteps; ++step) {
          const auto grads = scheme() == DistributionScheme::Zero ? local_gradients(params, step, rank)
                                                                  : average_gradients(params, step, ranks(), -1);
          for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[i];
          optimizer.step();
        }
        for (const auto& param : params) results[rank].push_back(param.detach().clone());
      });
  // The ranks apply the same updates; how each computed its own roots (in chunks of
  // one or as a stack) changes their last bits only.
  Problem run;
  const auto reference = one_process(run, ranks());
  for (size_t r = 1; r < results.size(); ++r) {
    for (size_t i = 0; i < reference.size(); ++i) EXPECT_TRUE(at::equal(results[r][i], results[0][i])) << r << " " << i;
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_LE(((results[0][i] - reference[i]).abs() / reference[i].abs().clamp_min(1e-3)).max().item<double>(), 1e-5)
        << "parameter " << i;
  }
}

// Dash::parameter_state on ranks: each rank shows its own blocks only, and over the
// ranks every block of every parameter is shown once (LocalShards: each rank's
// parameters are its own, all of their blocks shown on it).
TEST_P(DistributorContract, EachRankShowsTheStateOfTheBlocksItOwns) {
  DASH_SKIP_WITHOUT_GLOO();
  auto count_blocks = [](const Dash& optimizer, size_t param) {
    int64_t blocks = 0;
    for (const auto& [name, tensor] : optimizer.parameter_state(param)) {
      if (name.find(".factor_left") != std::string::npos) ++blocks;
    }
    return blocks;
  };
  auto params = testing::distributed_problem_parameters(false);
  Dash single(params, testing::distributed_problem_options());
  std::vector<int64_t> expected, shown(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) expected.push_back(count_blocks(single, i));
  std::mutex mutex;
  testing::on_gloo_ranks(ranks(), DistributedOptions().scheme(scheme()), [&](int64_t, DistributedContext& context) {
    auto own = testing::distributed_problem_parameters(false);
    Dash optimizer(own, testing::distributed_problem_options(),
        std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
    const std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < own.size(); ++i) shown[i] += count_blocks(optimizer, i);
  });
  if (scheme() == DistributionScheme::LocalShards) {
    for (auto& count : expected) count *= ranks();
  }
  EXPECT_EQ(shown, expected);
  EXPECT_GT(expected[0], 1);
}

// A 4 × 4 parameter with zero gradients (its roots fail at ε = 0) and an 8 × 8 one
// with a full-rank gradient: each rank owns one of the two blocks. (LocalShards:
// each rank owns both of its own; rank 1's 4 × 4 gradient is full rank too.)
TEST_P(DistributorContract, ARootFailureLimitReachedOnOneRankStopsEveryRank) {
  DASH_SKIP_WITHOUT_GLOO();
  if (ranks() != 2) GTEST_SKIP() << "two blocks for two ranks";
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<bool> unchanged;
  testing::on_gloo_ranks(2, DistributedOptions().scheme(scheme()), [&](int64_t rank, DistributedContext& context) {
    std::vector<at::Tensor> params{at::ones({4, 4}).set_requires_grad(true), at::ones({8, 8}).set_requires_grad(true)};
    const bool failing = scheme() != DistributionScheme::LocalShards || rank == 0;
    auto options = DashOptions(0.1).block_size(8).start_step(1).root_frequency(1).max_consecutive_root_failures(2);
    options.root().method(RootMethod::EVD).epsilon(0.0);
    Dash optimizer(
        params, options, std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
    auto set_gradients = [&] {
      params[0].mutable_grad() = failing ? at::zeros({4, 4}) : at::eye(4) + 0.1 * at::ones({4, 4});
      params[1].mutable_grad() = at::eye(8) + 0.1 * at::ones({8, 8});  // full rank: its roots succeed
    };
    for (int t = 0; t < 2; ++t) {
      set_gradients();
      optimizer.step();
    }
    set_gradients();
    const auto before = params[1].detach().clone();
    const auto error = testing::error_of([&] { optimizer.step(); });
    const std::lock_guard<std::mutex> lock(mutex);
    errors.push_back(error);
    unchanged.push_back(at::equal(params[1].detach(), before));
  });
  ASSERT_EQ(errors.size(), 2u);
  int naming = 0;
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_THAT(errors[r], HasSubstr("failed")) << errors[r];
    naming += errors[r].find("max_consecutive_root_failures = 2") != std::string::npos;
    EXPECT_TRUE(unchanged[r]);
  }
  EXPECT_EQ(naming, 1) << "the rank that owns the failing factors names them";
}

// Ranks whose options differ (an lr set on one rank only, after a first step they
// agreed on) are refused at the step, on every rank alike and naming the option,
// before any parameter changes. Options a rank may set for itself
// (kRankLocalOptions, optim/rank_agreement.h) are not compared:
// RanksWithDifferentWorkspaceBudgetsExchangeInTheSameRounds.
TEST_P(DistributorContract, RanksWhoseOptionsDifferAreRefusedNamingTheOption) {
  DASH_SKIP_WITHOUT_GLOO();
  if (ranks() < 2) GTEST_SKIP() << "one rank";
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<bool> unchanged;
  testing::on_gloo_ranks(ranks(), DistributedOptions().scheme(scheme()).timeout(std::chrono::seconds(20)),
      [&](int64_t rank, DistributedContext& context) {
        auto params = testing::distributed_problem_parameters(false);
        Dash optimizer(params, testing::distributed_problem_options(),
            std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
        testing::set_distributed_problem_gradients(params, 0);
        optimizer.step();
        auto& options = static_cast<DashOptions&>(optimizer.param_groups()[0].options());
        if (rank == 1) options.lr(2 * options.lr());
        testing::set_distributed_problem_gradients(params, 1);
        const auto before = params[0].detach().clone();
        const auto error = testing::error_of([&] { optimizer.step(); });
        const std::lock_guard<std::mutex> lock(mutex);
        errors.push_back(error);
        unchanged.push_back(at::equal(params[0].detach(), before));
      });
  ASSERT_EQ(errors.size(), static_cast<size_t>(ranks()));
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_THAT(errors[r], HasSubstr("the ranks' options differ (group 0 lr)")) << r;
    EXPECT_TRUE(unchanged[r]) << r;
  }
}

// Under Zero and LocalShards only one rank may hold the NaN: every rank skips (or, by
// default, raises).
TEST_P(DistributorContract, ANonFiniteGradientOnOneRankSkipsTheStepOnEveryRank) {
  DASH_SKIP_WITHOUT_GLOO();
  if (scheme() == DistributionScheme::Replicated) GTEST_SKIP() << "replicated gradients are the same on every rank";
  for (const auto policy : {NonFiniteGradients::SkipStep, NonFiniteGradients::Error}) {
    std::mutex mutex;
    std::vector<std::string> errors;
    std::vector<int64_t> skipped;
    std::vector<bool> unchanged;
    on_first_step_of_ranks(policy, [&](int64_t rank, std::vector<at::Tensor>& params, Dash& optimizer) {
      if (rank == 1) params[0].mutable_grad()[3][5] = std::numeric_limits<float>::quiet_NaN();
      std::vector<at::Tensor> before;
      for (const auto& param : params) before.push_back(param.detach().clone());
      const auto error = testing::error_of([&] { optimizer.step(); });
      bool same = true;
      for (size_t i = 0; i < params.size(); ++i) same = same && at::equal(params[i].detach(), before[i]);
      const std::lock_guard<std::mutex> lock(mutex);
      errors.push_back(error);
      skipped.push_back(optimizer.diagnostics().skipped_steps);
      unchanged.push_back(same);
    });
    for (size_t r = 0; r < errors.size(); ++r) {
      EXPECT_TRUE(unchanged[r]);
      if (policy == NonFiniteGradients::SkipStep) {
        EXPECT_EQ(errors[r], "<no error>");
        EXPECT_EQ(skipped[r], 1);
      } else {
        EXPECT_THAT(errors[r], HasSubstr("non-finite gradient"));
      }
    }
  }
}

// Groups of different policies: a NaN in a skip-step group's parameter, on one rank
// only, is skipped by every rank, including those that see none of it (they once
// took the strictest group's policy and raised alone).
TEST_P(DistributorContract, RanksThatDoNotSeeTheNanFollowTheGroupOfTheRankThatDoes) {
  DASH_SKIP_WITHOUT_GLOO();
  if (scheme() == DistributionScheme::Replicated) GTEST_SKIP() << "replicated gradients are the same on every rank";
  std::mutex mutex;
  std::vector<std::string> errors;
  testing::on_gloo_ranks(
      ranks(), DistributedOptions().scheme(scheme()), [&](int64_t rank, DistributedContext& context) {
        auto params = testing::distributed_problem_parameters(false);
        std::vector<torch::optim::OptimizerParamGroup> groups;
        const auto options = testing::distributed_problem_options();
        groups.emplace_back(std::vector<at::Tensor>{params[0], params[1], params[2]},
            std::make_unique<DashOptions>(DashOptions(options).non_finite_gradients(NonFiniteGradients::SkipStep)));
        groups.emplace_back(std::vector<at::Tensor>(params.begin() + 3, params.end()),
            std::make_unique<DashOptions>(DashOptions(options).non_finite_gradients(NonFiniteGradients::Error)));
        Dash optimizer(std::move(groups), options,
            std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
        testing::set_distributed_problem_gradients(params, 0);
        if (rank == 1) params[0].mutable_grad()[3][5] = std::numeric_limits<float>::quiet_NaN();
        const auto error = testing::error_of([&] { optimizer.step(); });
        const std::lock_guard<std::mutex> lock(mutex);
        errors.push_back(error + " (skipped " + std::to_string(optimizer.diagnostics().skipped_steps) + ")");
      });
  for (const auto& error : errors) EXPECT_EQ(error, "<no error> (skipped 1)");
}

const auto kSchemes =
    ::testing::Values(Case{DistributionScheme::Replicated, 1}, Case{DistributionScheme::Replicated, 2},
        Case{DistributionScheme::Replicated, 3}, Case{DistributionScheme::Zero, 2}, Case{DistributionScheme::Zero, 3},
        Case{DistributionScheme::LocalShards, 2}, Case{DistributionScheme::LocalShards, 3});

INSTANTIATE_TEST_SUITE_P(Schemes, DistributorContract, kSchemes, [](const auto& info) {
  return to_string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param)) + "_ranks";
});

// LocalShards as FSDP2 shards parameters: rank r holds rows [r·c, (r + 1)·c) of each
// (c = ⌈rows / ranks⌉, so the last shards are shorter or empty) and that part of the
// average gradient. Each rank ends bitwise where one process stepping its own shards
// ends, although the ranks' shapes differ.
std::vector<at::Tensor> row_shards(const std::vector<at::Tensor>& full, int64_t rank, int64_t ranks) {
  std::vector<at::Tensor> shards;
  for (const auto& tensor : full) {
    const auto rows = tensor.dim() == 0 ? int64_t{1} : tensor.size(0);
    const auto per_rank = (rows + ranks - 1) / ranks;
    const auto begin = std::min(rows, rank * per_rank);
    const auto shard = tensor.dim() == 0 ? tensor.view({1}) : tensor;
    shards.push_back(shard.narrow(0, begin, std::min(rows, begin + per_rank) - begin).detach().clone());
  }
  return shards;
}

TEST(LocalShards, RanksWithShardsOfTheirOwnShapesEachStepAsOneProcess) {
  DASH_SKIP_WITHOUT_GLOO();
  constexpr int64_t kRanks = 3;
  const auto initial = testing::distributed_problem_parameters(false);
  // Made before the ranks start: making them sets the gradients of `initial`.
  std::vector<std::vector<std::vector<at::Tensor>>> gradients(testing::kDistributedProblemSteps);
  for (int64_t step = 0; step < testing::kDistributedProblemSteps; ++step) {
    const auto average = average_gradients(initial, step, kRanks, -1);
    for (int64_t rank = 0; rank < kRanks; ++rank) gradients[step].push_back(row_shards(average, rank, kRanks));
  }
  auto run = [&](Dash& optimizer, std::vector<at::Tensor>& shards, int64_t rank) {
    for (int64_t step = 0; step < testing::kDistributedProblemSteps; ++step) {
      const auto& grads = gradients[step][rank];
      for (size_t i = 0; i < shards.size(); ++i) shards[i].mutable_grad() = grads[i];
      optimizer.step();
    }
  };
  std::vector<std::vector<at::Tensor>> on_ranks(kRanks), alone(kRanks);
  testing::on_gloo_ranks(kRanks, DistributedOptions().scheme(DistributionScheme::LocalShards),
      [&](int64_t rank, DistributedContext& context) {
        auto shards = row_shards(initial, rank, kRanks);
        for (auto& shard : shards) shard.set_requires_grad(true);
        Dash optimizer(shards, testing::distributed_problem_options(),
            std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
        run(optimizer, shards, rank);
        on_ranks[rank] = shards;
      });
  for (int64_t rank = 0; rank < kRanks; ++rank) {
    auto shards = row_shards(initial, rank, kRanks);
    for (auto& shard : shards) shard.set_requires_grad(true);
    Dash optimizer(shards, testing::distributed_problem_options());
    run(optimizer, shards, rank);
    alone[rank] = shards;
  }
  ASSERT_EQ(on_ranks[2][0].size(0), 70 - 2 * 24) << "an uneven last shard";
  expect_bitwise({on_ranks[0]}, alone[0]);
  expect_bitwise({on_ranks[1]}, alone[1]);
  expect_bitwise({on_ranks[2]}, alone[2]);
  EXPECT_FALSE(at::equal(on_ranks[0][0], row_shards(initial, 0, kRanks)[0])) << "the run moved the parameters";
}

}  // namespace
}  // namespace dash
