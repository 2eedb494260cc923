// One rank of the distributed tests (launched by test_distributed through
// dash::launch::launch_local_ranks (apps/launch), so RANK, WORLD_SIZE, MASTER_* are set):
//   distributed_worker SCENARIO OUT_DIR
// SCENARIO: match | tiny | bf16 | resume | exit | chunked (a workspace limit of one
// byte: every chunk one block or factor). Writes OUT_DIR/params-rank<r>.pt,
// OUT_DIR/stats-rank<r>.txt, and on failure OUT_DIR/error-rank<r>.txt.

#include "distributed/distributed_problem.h"

#include <dash/distributed.h>

#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

namespace {

constexpr auto kTimeout = std::chrono::seconds(20);

int run(const std::string& scenario, const std::string& out) {
  const auto environment = dash::rank_environment();
  TORCH_CHECK(environment.has_value(), "distributed_worker: RANK and WORLD_SIZE are not set");
  const auto rank = environment->rank;
  auto group = dash::gloo_process_group_from_environment(*environment, kTimeout);
  auto options = dash::DistributedOptions().timeout(kTimeout);
  if (scenario == "bf16") options.communication_dtype(dash::CommunicationDtype::BF16);
  auto context = std::make_shared<dash::DistributedContext>(group, options);

  const bool tiny = scenario == "tiny";
  auto params = dash::testing::distributed_problem_parameters(tiny);
  auto dash_options = dash::testing::distributed_problem_options();
  if (scenario == "chunked") dash_options.workspace_limit(1.0);
  auto optimizer = std::make_unique<dash::Dash>(params, dash_options, context);
  for (int64_t step = 0; step < dash::testing::kDistributedProblemSteps; ++step) {
    if (scenario == "exit" && rank == 1 && step == 3) std::_Exit(3);  // dies between two collectives
    if (scenario == "resume" && step == 5) {
      // Each rank saves its shard, and a fresh optimizer continues from it.
      const auto path = out + "/optimizer-rank" + std::to_string(rank) + ".pt";
      torch::save(*optimizer, path);
      optimizer = std::make_unique<dash::Dash>(params, dash::testing::distributed_problem_options(), context);
      torch::load(*optimizer, path);
    }
    dash::testing::set_distributed_problem_gradients(params, step);
    optimizer->step();
  }
  std::vector<at::Tensor> values;
  for (const auto& param : params) values.push_back(param.detach());
  torch::save(values, out + "/params-rank" + std::to_string(rank) + ".pt");
  std::ofstream(out + "/stats-rank" + std::to_string(rank) + ".txt")
      << optimizer->state_bytes() << ' ' << optimizer->communicated_bytes_per_step() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: distributed_worker SCENARIO OUT_DIR\n";
    return 2;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const std::exception& error) {
    const char* rank = std::getenv("RANK");
    std::ofstream(std::string(argv[2]) + "/error-rank" + (rank ? rank : "x") + ".txt") << error.what() << '\n';
    std::cerr << error.what() << '\n';
    return 7;
  }
}
