// Checkpoints that change world size: a run that saves after five steps on N ranks
// (threads, tests/support/gloo_threads.h) and continues on M ranks, from every
// rank's archive (Dash::load_resharded) or from the union of the ranks' states keyed
// by parameter (Dash::load_parameter_states), ends where ten uninterrupted steps in
// one process end, bitwise (each block's state moves whole, and per block the
// arithmetic is one process's); and shards that do not fit are refused, naming why.

#include "distributed/distributed_problem.h"
#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/gloo_threads.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace dash {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = testing::kDistributedProblemSteps;
constexpr int64_t kSaveAt = kSteps / 2;

std::shared_ptr<const DistributedContext> borrowed(DistributedContext& context) {
  return {&context, [](const DistributedContext*) {}};
}

// Steps [from, to) of the problem on `params`.
void train(Dash& optimizer, const std::vector<at::Tensor>& params, int64_t from, int64_t to) {
  for (int64_t step = from; step < to; ++step) {
    testing::set_distributed_problem_gradients(params, step);
    optimizer.step();
  }
}

std::vector<at::Tensor> values_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> values;
  for (const auto& param : params) values.push_back(param.detach().clone());
  return values;
}

struct Saved {
  std::vector<std::string> shards;     // every rank's archive, in rank order
  std::vector<ParameterState> states;  // per parameter, the union of the ranks' entries (copies)
  StepCounts counts;
  std::vector<at::Tensor> params;  // after kSaveAt steps (the same on every rank)
};

std::string archive_of(const Dash& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

// kSaveAt steps on `ranks` ranks (1: a single process, no context), then every rank's shard.
Saved train_and_save(int64_t ranks) {
  Saved saved;
  std::mutex mutex;
  saved.shards.resize(static_cast<size_t>(ranks));
  auto run = [&](int64_t rank, std::shared_ptr<const DistributedContext> context) {
    auto params = testing::distributed_problem_parameters(false);
    Dash optimizer(params, testing::distributed_problem_options(), std::move(context));
    train(optimizer, params, 0, kSaveAt);
    const std::lock_guard<std::mutex> lock(mutex);
    saved.shards[rank] = archive_of(optimizer);
    saved.states.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      for (const auto& [name, tensor] : optimizer.parameter_state(i))
        saved.states[i].emplace_back(name, tensor.clone());
    }
    const auto diagnostics = optimizer.diagnostics();
    saved.counts = {diagnostics.steps_taken, diagnostics.skipped_steps, diagnostics.overflow_skipped_steps};
    if (rank == 0) saved.params = values_of(params);
  };
  if (ranks == 1) {
    run(0, nullptr);
  } else {
    testing::on_gloo_ranks(ranks, {}, [&](int64_t rank, DistributedContext& context) { run(rank, borrowed(context)); });
  }
  return saved;
}

std::vector<torch::serialize::InputArchive> archives(const std::vector<std::string>& shards) {
  std::vector<torch::serialize::InputArchive> result(shards.size());
  for (size_t r = 0; r < shards.size(); ++r) {
    std::istringstream bytes(shards[r]);
    result[r].load_from(bytes);
  }
  return result;
}

enum class Checkpoint { Archives, ParameterStates };

// Continues `saved` on `ranks` ranks to kSteps; every rank's parameters.
std::vector<std::vector<at::Tensor>> resume(const Saved& saved, int64_t ranks, Checkpoint kind) {
  std::vector<std::vector<at::Tensor>> results(static_cast<size_t>(ranks));
  auto run = [&](int64_t rank, std::shared_ptr<const DistributedContext> context) {
    std::vector<at::Tensor> params;
    for (const auto& value : saved.params) params.push_back(value.clone().set_requires_grad(true));
    Dash optimizer(params, testing::distributed_problem_options(), std::move(context));
    if (kind == Checkpoint::Archives) {
      auto shards = archives(saved.shards);
      optimizer.load_resharded(shards);
    } else {
      optimizer.load_parameter_states({testing::distributed_problem_options()}, saved.states, saved.counts);
    }
    train(optimizer, params, kSaveAt, kSteps);
    results[rank] = values_of(params);
  };
  if (ranks == 1) {
    run(0, nullptr);
  } else {
    testing::on_gloo_ranks(ranks, {}, [&](int64_t rank, DistributedContext& context) { run(rank, borrowed(context)); });
  }
  return results;
}

std::vector<at::Tensor> uninterrupted() {
  auto params = testing::distributed_problem_parameters(false);
  Dash optimizer(params, testing::distributed_problem_options());
  train(optimizer, params, 0, kSteps);
  return values_of(params);
}

class Resharding : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

void expect_continues_bitwise(Checkpoint kind, int64_t from, int64_t to) {
  const auto reference = uninterrupted();
  const auto saved = train_and_save(from);
  const auto resumed = resume(saved, to, kind);
  for (size_t rank = 0; rank < resumed.size(); ++rank) {
    ASSERT_EQ(resumed[rank].size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_TRUE(at::equal(resumed[rank][i], reference[i]))
          << from << " → " << to << " ranks, rank " << rank << ", parameter " << i << ": largest difference "
          << (resumed[rank][i] - reference[i]).abs().max().item<double>();
    }
  }
  // The second half moved the parameters: the comparison is not of the saved values.
  EXPECT_FALSE(at::equal(reference[0], saved.params[0]));
}

TEST_P(Resharding, ContinuesAsTheUninterruptedRunBitwise) {
  DASH_SKIP_WITHOUT_GLOO();
  expect_continues_bitwise(Checkpoint::Archives, GetParam().first, GetParam().second);
}

TEST_P(Resharding, ParameterStatesContinueAsTheUninterruptedRunBitwise) {
  DASH_SKIP_WITHOUT_GLOO();
  expect_continues_bitwise(Checkpoint::ParameterStates, GetParam().first, GetParam().second);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Resharding,
    ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{1, 2},
        std::pair<int64_t, int64_t>{2, 1}, std::pair<int64_t, int64_t>{2, 4}, std::pair<int64_t, int64_t>{3, 2}),
    [](const auto& info) { return std::to_string(info.param.first) + "_to_" + std::to_string(info.param.second); });

TEST(ReshardingErrors, AllShardsInRankOrderOrNothingChanges) {
  DASH_SKIP_WITHOUT_GLOO();
  const auto saved = train_and_save(2);
  auto params = testing::distributed_problem_parameters(false);
  Dash optimizer(params, testing::distributed_problem_options());
  auto one = archives({saved.shards[0]});
  EXPECT_THAT(testing::error_of([&] { optimizer.load_resharded(one); }),
      HasSubstr("shard 0 was written by one of 2 ranks, but 1 shards were given"));
  auto swapped = archives({saved.shards[1], saved.shards[0]});
  EXPECT_THAT(testing::error_of([&] { optimizer.load_resharded(swapped); }),
      HasSubstr("checkpoint shard 0 of 2 was not saved by rank 0 of 2"));
  auto other_shapes = testing::distributed_problem_parameters(true);
  Dash other(other_shapes, testing::distributed_problem_options());
  auto shards = archives(saved.shards);
  EXPECT_THAT(testing::error_of([&] { other.load_resharded(shards); }), HasSubstr("saved for other parameters"));
  // Refused loads left the optimizer fresh: its state is still zero.
  EXPECT_EQ(optimizer.diagnostics().steps_taken, 0);
  // The plain load names the way out.
  auto plain = archives({saved.shards[0]});
  EXPECT_THAT(testing::error_of([&] { optimizer.load(plain[0]); }), HasSubstr("load_resharded()"));
}

}  // namespace
}  // namespace dash
