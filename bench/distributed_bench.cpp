// dash-bench distributed: DASH step time, communication and memory on N local ranks,
// for each distribution scheme, measured side by side in one run.

#include "distributed_bench.h"

#include "arguments.h"
#include "model_shapes.h"
#include "report.h"
#include "timing.h"

#include "common/memory_peak.h"
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
#include <sstream>

namespace dash::bench {
namespace {

// Bytes sent over the loopback interface so far by every process of this network
// namespace (/proc/net/dev), or -1 where that cannot be read. Local ranks talk over
// loopback only, so the difference across the timed steps is what they sent,
// measured rather than computed from buffer sizes (TCP and Gloo headers included).
int64_t loopback_bytes_sent() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.substr(0, colon).find("lo") == std::string::npos) continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t value = 0;
    // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit bytes.
    for (int i = 0; i < 9 && fields >> value; ++i) {
    }
    return fields ? value : -1;
  }
  return -1;
}

int64_t gradient_bytes(const std::vector<at::Tensor>& params) {
  int64_t bytes = 0;
  for (const auto& param : params) bytes += param.grad().defined() ? param.grad().nbytes() : 0;
  return bytes;
}

DashOptions bench_options(const Arguments& arguments) {
  return DashOptions(1e-3)
      .block_size(arguments.integer("block"))
      .root_frequency(arguments.integer("frequency"))
      .start_step(1)
      .root(InverseRootOptions()
                .method(parse_root_method(arguments.text("method")))
                .scaling(SpectralScaleOptions().method(parse_scaling(arguments.text("scaling")))));
}

// One scheme on this rank: its optimizer, and what its timed steps measured.
struct SchemeRun {
  DistributionScheme scheme = DistributionScheme::Replicated;
  std::shared_ptr<const DistributedContext> context;
  std::unique_ptr<Dash> optimizer;
  std::vector<double> times_ms;
  int64_t loopback_sent = 0;  // by all ranks over the timed steps; < 0: not measured
  int64_t peak_bytes = 0;     // the largest transient peak of a timed step
};

// A data-parallel step as the scheme has it: under Replicated the gradient
// all-reduce DDP would do first (one flat buffer, DistributedContext::average),
// then the optimizer step. Returns the step's transient peak.
int64_t scheme_step(SchemeRun& run, const std::vector<at::Tensor>& params) {
  const common::MeasureMemoryPeak measure;
  if (run.context && run.scheme == DistributionScheme::Replicated) {
    std::vector<at::Tensor> grads;
    for (const auto& param : params) grads.push_back(param.grad());
    run.context->average(grads);
  }
  run.optimizer->step();
  return measure.peak_bytes();
}

void barrier(const SchemeRun& run) {
  if (run.context) run.context->group().barrier()->wait();
}

// Memory of one process with the whole model (rank 0 only, untimed): gradients,
// state, kept workspace and the largest step peak over one root period.
nlohmann::json one_process_memory(const Arguments& arguments, const ModelShapes& model) {
  auto params = model_parameters(model, at::Device(at::kCPU), 0);
  Dash optimizer(params, bench_options(arguments));
  int64_t peak = 0;
  for (int64_t step = 0; step <= arguments.integer("frequency"); ++step) {
    const common::MeasureMemoryPeak measure;
    optimizer.step();
    peak = std::max(peak, measure.peak_bytes());
  }
  const auto diagnostics = optimizer.diagnostics();
  return {{"gradient_bytes", gradient_bytes(params)}, {"state_bytes", diagnostics.state_bytes},
      {"workspace_bytes", diagnostics.workspace_bytes}, {"step_peak_bytes", peak}};
}

double megabytes(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

int run_rank(const Arguments& arguments, const std::optional<RankEnvironment>& environment) {
  const auto timeout = std::chrono::minutes(2);
  c10::intrusive_ptr<ProcessGroup> group;
  if (environment.has_value() && environment->world_size > 1) {
    group = gloo_process_group_from_environment(*environment, timeout);
  }
  const int64_t ranks = group ? group->getSize() : 1;
  const bool main_rank = !group || group->getRank() == 0;
  const auto model = preset_model(arguments.text("preset"), arguments.integer("layers"));
  // Every rank has the same parameters and gradients (under Zero each rank's own
  // gradients would differ; the work and the bytes do not depend on their values).
  auto params = model_parameters(model, at::Device(at::kCPU), 0);

  std::vector<SchemeRun> runs;
  for (const auto& name : arguments.list("schemes")) {
    SchemeRun run;
    run.scheme = parse_distribution_scheme(name);
    if (group) {
      run.context = std::make_shared<DistributedContext>(
          group, DistributedOptions()
                     .communication_dtype(parse_communication_dtype(arguments.text("communication")))
                     .scheme(run.scheme)
                     .timeout(timeout));
    }
    run.optimizer = std::make_unique<Dash>(params, bench_options(arguments), run.context);
    runs.push_back(std::move(run));
    if (!group) break;  // one process: the schemes are the same
  }
  for (auto& run : runs) {
    for (long long i = 0; i < arguments.integer("warmup"); ++i) (void)scheme_step(run, params);
  }
  // Rounds of a few steps per scheme, alternating, so that drifts of the machine
  // fall on every scheme alike.
  const int64_t steps = arguments.integer("steps");
  const int64_t per_round = std::max<int64_t>(1, std::min<int64_t>(steps, 5));
  for (int64_t done = 0; done < steps; done += per_round) {
    for (auto& run : runs) {
      barrier(run);
      const auto sent_before = loopback_bytes_sent();
      for (int64_t i = done; i < std::min(steps, done + per_round); ++i) {
        int64_t peak = 0;
        run.times_ms.push_back(time_it(
            [&] {
              peak = scheme_step(run, params);
              return params.back();
            },
            0, 1)
                                   .median_ms);
        run.peak_bytes = std::max(run.peak_bytes, peak);
      }
      barrier(run);
      const auto sent_after = loopback_bytes_sent();
      if (sent_before < 0 || sent_after < 0 || run.loopback_sent < 0) {
        run.loopback_sent = -1;
      } else {
        run.loopback_sent += sent_after - sent_before;
      }
    }
  }
  const auto baseline = main_rank && arguments.integer("one-process-memory") == 1
                            ? std::optional<nlohmann::json>(one_process_memory(arguments, model))
                            : std::nullopt;
  if (!main_rank) return 0;

  std::cout << "dash-bench distributed: " << model.name << ", B = " << arguments.text("block") << ", "
            << arguments.text("method") << "/" << arguments.text("scaling") << ", f = " << arguments.text("frequency")
            << ", " << ranks << " rank(s), communication " << arguments.text("communication") << ", " << steps
            << " timed steps per scheme (rank 0; replicated includes its gradient all-reduce)\n";
  nlohmann::json report = {{"command", "distributed"}, {"model", model.name}, {"ranks", ranks},
      {"block_size", arguments.integer("block")}, {"method", arguments.text("method")},
      {"scaling", arguments.text("scaling")}, {"frequency", arguments.integer("frequency")},
      {"communication", arguments.text("communication")}, {"steps", steps}, {"schemes", nlohmann::json::array()}};
  for (const auto& run : runs) {
    auto times = run.times_ms;
    const double mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
    std::sort(times.begin(), times.end());
    const auto diagnostics = run.optimizer->diagnostics();
    const double sent_per_rank =
        run.loopback_sent < 0 ? -1.0 : static_cast<double>(run.loopback_sent) / static_cast<double>(ranks * steps);
    const int64_t grads = gradient_bytes(params);
    const int64_t total = grads + diagnostics.state_bytes + diagnostics.workspace_bytes + run.peak_bytes;
    std::cout << "  " << (group ? to_string(run.scheme) : std::string("one process")) << ": step mean "
              << fixed(mean, 1) << " ms, median " << fixed(times[times.size() / 2], 1) << " ms; sent per rank per step "
              << (sent_per_rank < 0 ? std::string("unmeasured") : fixed(sent_per_rank / 1e6, 2) + " MB (loopback)")
              << ", dash's count (sent + received) "
              << fixed(megabytes(run.optimizer->communicated_bytes_per_step()), 2)
              << " MB\n    rank 0 memory MB: gradients " << fixed(megabytes(grads), 1) << ", state "
              << fixed(megabytes(diagnostics.state_bytes), 1) << ", workspace "
              << fixed(megabytes(diagnostics.workspace_bytes), 1) << ", step peak "
              << fixed(megabytes(run.peak_bytes), 1) << "; total " << fixed(megabytes(total), 1) << "\n";
    report["schemes"].push_back({{"scheme", group ? to_string(run.scheme) : "one-process"}, {"mean_step_ms", mean},
        {"median_step_ms", times[times.size() / 2]}, {"loopback_bytes_sent_per_rank_per_step", sent_per_rank},
        {"communicated_bytes_per_step", run.optimizer->communicated_bytes_per_step()}, {"gradient_bytes", grads},
        {"state_bytes", diagnostics.state_bytes}, {"workspace_bytes", diagnostics.workspace_bytes},
        {"step_peak_bytes", run.peak_bytes}, {"total_bytes", total}});
  }
  if (baseline.has_value()) {
    const auto& memory = *baseline;
    const int64_t total = memory["gradient_bytes"].get<int64_t>() + memory["state_bytes"].get<int64_t>() +
                          memory["workspace_bytes"].get<int64_t>() + memory["step_peak_bytes"].get<int64_t>();
    std::cout << "  one process, whole model (untimed): memory MB: gradients "
              << fixed(megabytes(memory["gradient_bytes"].get<int64_t>()), 1) << ", state "
              << fixed(megabytes(memory["state_bytes"].get<int64_t>()), 1) << ", workspace "
              << fixed(megabytes(memory["workspace_bytes"].get<int64_t>()), 1) << ", step peak "
              << fixed(megabytes(memory["step_peak_bytes"].get<int64_t>()), 1) << "; total "
              << fixed(megabytes(total), 1) << "\n";
    report["one_process_memory"] = memory;
    report["one_process_memory"]["total_bytes"] = total;
  }
  write_json_report(report, arguments.text("json"));
  return 0;
}

}  // namespace

int run_distributed_bench(const std::vector<std::string>& args) {
  Arguments arguments(args,
      {{"preset", "llama-tiny"}, {"layers", integer_option("-1", -1)}, {"block", integer_option("256", 1)},
          {"frequency", integer_option("10", 1)}, {"method", "ndb"}, {"scaling", "multi-pi"}, {"communication", "fp32"},
          {"schemes", "replicated,zero"}, {"nproc", integer_option("1", 1, 64)}, {"warmup", integer_option("2", 0)},
          {"steps", integer_option("20", 1)}, {"one-process-memory", integer_option("0", 0, 1)}, {"json", ""}});
  // The names, before any rank starts.
  (void)parse_root_method(arguments.text("method"));
  (void)parse_scaling(arguments.text("scaling"));
  (void)parse_communication_dtype(arguments.text("communication"));
  TORCH_CHECK(!arguments.list("schemes").empty(), "dash-bench distributed: --schemes is empty");
  for (const auto& scheme : arguments.list("schemes")) (void)parse_distribution_scheme(scheme);
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
