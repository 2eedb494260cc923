// dash-bench distributed: DASH step time and communication on N local ranks.

#include "distributed_bench.h"

#include "arguments.h"
#include "model_shapes.h"
#include "report.h"
#include "timing.h"

#include "local_launch.h"

#include <dash/dash.h>
#include <dash/distributed.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>

namespace dash::bench {
namespace {

int run_rank(const Arguments& arguments, const std::optional<RankEnvironment>& environment) {
  std::shared_ptr<const DistributedContext> context;
  if (environment.has_value() && environment->world_size > 1) {
    const auto timeout = std::chrono::minutes(2);
    context = std::make_shared<DistributedContext>(gloo_process_group_from_environment(*environment, timeout),
        DistributedOptions()
            .communication_dtype(parse_communication_dtype(arguments.text("communication")))
            .timeout(timeout));
  }
  const bool main_rank = !context || context->rank() == 0;
  const auto model = preset_model(arguments.text("preset"), arguments.integer("layers"));
  // Every rank has the same parameters and gradients, as after a gradient all-reduce.
  auto params = model_parameters(model, at::Device(at::kCPU), 0);
  const auto options = DashOptions(1e-3)
                           .block_size(arguments.integer("block"))
                           .root_frequency(arguments.integer("frequency"))
                           .start_step(1)
                           .root(InverseRootOptions()
                                     .method(parse_root_method(arguments.text("method")))
                                     .scaling(SpectralScaleOptions().method(parse_scaling(arguments.text("scaling")))));
  Dash optimizer(params, options, context);
  auto step = [&] {
    optimizer.step();
    return params.back();
  };
  for (long long i = 0; i < arguments.integer("warmup"); ++i) (void)time_it(step, 0, 1);
  std::vector<double> times;
  for (long long i = 0; i < arguments.integer("steps"); ++i) times.push_back(time_it(step, 0, 1).median_ms);
  if (!main_rank) return 0;

  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  std::sort(times.begin(), times.end());
  const int64_t ranks = context ? context->world_size() : 1;
  std::cout << "dash-bench distributed: " << model.name << ", B = " << arguments.text("block") << ", "
            << arguments.text("method") << "/" << arguments.text("scaling") << ", f = " << arguments.text("frequency")
            << ", " << ranks << " rank(s), communication " << arguments.text("communication") << "\n"
            << "  step: mean " << fixed(mean, 1) << " ms, median " << fixed(times[times.size() / 2], 1) << " ms over "
            << times.size() << " steps (rank 0)\n"
            << "  optimizer state on rank 0: " << fixed(static_cast<double>(optimizer.state_bytes()) / 1e6, 2)
            << " MB; all-gather per step per rank: "
            << fixed(static_cast<double>(optimizer.communicated_bytes_per_step()) / 1e6, 2) << " MB\n";
  if (!arguments.text("json").empty()) {
    nlohmann::json report = {{"command", "distributed"}, {"model", model.name}, {"ranks", ranks},
        {"block_size", arguments.integer("block")}, {"method", arguments.text("method")},
        {"scaling", arguments.text("scaling")}, {"frequency", arguments.integer("frequency")},
        {"communication", arguments.text("communication")}, {"mean_step_ms", mean},
        {"median_step_ms", times[times.size() / 2]}, {"state_bytes_rank0", optimizer.state_bytes()},
        {"communicated_bytes_per_step", optimizer.communicated_bytes_per_step()}};
    write_json_report(report, arguments.text("json"));
  }
  return 0;
}

}  // namespace

int run_distributed_bench(const std::vector<std::string>& args) {
  Arguments arguments(
      args, {{"preset", "llama-tiny"}, {"layers", integer_option("-1", -1)}, {"block", integer_option("256", 1)},
                {"frequency", integer_option("10", 1)}, {"method", "ndb"}, {"scaling", "multi-pi"},
                {"communication", "fp32"}, {"nproc", integer_option("1", 1, 64)}, {"warmup", integer_option("2", 0)},
                {"steps", integer_option("20", 1)}, {"json", ""}});
  // The names, before any rank starts.
  (void)parse_root_method(arguments.text("method"));
  (void)parse_scaling(arguments.text("scaling"));
  (void)parse_communication_dtype(arguments.text("communication"));
  const auto environment = rank_environment();
  // Once, before any rank starts (ranks checking at once would race on the test file).
  if (!environment.has_value()) check_output_file("json", arguments.text("json"));
  if (!environment.has_value() && arguments.integer("nproc") > 1) {
    std::vector<std::string> command{std::filesystem::read_symlink("/proc/self/exe").string(), "distributed"};
    command.insert(command.end(), args.begin(), args.end());
    return launch::launch_local_ranks(command, arguments.integer("nproc"));
  }
  return run_rank(arguments, environment);
}

}  // namespace dash::bench
