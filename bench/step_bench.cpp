// dash-bench step: the cost of one optimizer step on real model shapes — LibTorch
// AdamW, DASH sequential with EVD (the Distributed Shampoo baseline) and batched
// DASH for every root method × scaling × precision.

#include "step_bench.h"

#include "arguments.h"
#include "report.h"
#include "model_shapes.h"
#include "timing.h"

#include <dash/dash.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <stdexcept>

namespace dash::bench {
namespace {

struct Configuration {
  std::string label;
  bool adamw = false;
  DashOptions options;
};

struct Measurement {
  double mean_ms = 0.0;  // amortised over the timed steps (f = 10: one root step in ten)
  TimingSummary per_step;
  double flops = 0.0;   // per step, amortised
  double ceiling_gflops = 0.0;
  int64_t state_bytes = 0;
  std::map<std::string, double> phases_ms;  // per step, with --profile
};

// FLOPs of one DASH step from the stack shapes: factor updates G Gᵀ and Gᵀ G and
// the preconditioning L̄ Ĝ R̄ (2·r·c·(r + c) each per block), plus the inverse roots
// every f steps.
double dash_step_flops(const Dash& optimizer, const DashOptions& options) {
  const auto diagnostics = optimizer.diagnostics();
  double flops = 0.0;
  for (const auto& stack : diagnostics.block_stacks) {
    const double r = static_cast<double>(stack.rows), c = static_cast<double>(stack.cols);
    const double per_side = stack.one_sided ? 2.0 * r * r * c : 2.0 * r * c * (r + c);
    flops += 2.0 * per_side * static_cast<double>(stack.count);
  }
  for (const auto& stack : diagnostics.factor_stacks) {
    flops += inverse_root_flops(stack.count, stack.size, stack.root, options.root()) /
        static_cast<double>(options.root_frequency());
  }
  return flops;
}

// The bmm ceiling on the factor stacks in use: Σ FLOPs / Σ time of one (N, b, b)
// bmm per stack, in the configuration's precision.
double stack_ceiling(const Dash& optimizer, MatmulPrecision precision, const at::Device& device) {
  double flops = 0.0, seconds = 0.0;
  for (const auto& stack : optimizer.diagnostics().factor_stacks) {
    const double stack_flops = 2.0 * static_cast<double>(stack.count) * std::pow(static_cast<double>(stack.size), 3);
    flops += stack_flops;
    seconds += stack_flops / (bmm_gflops(stack.count, stack.size, matmul_dtype(precision), device, 1, 3) * 1e9);
  }
  return seconds > 0.0 ? flops / seconds / 1e9 : 0.0;
}

int64_t adamw_state_bytes(const torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& entry : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
    bytes += state.exp_avg().nbytes() + state.exp_avg_sq().nbytes();
  }
  return bytes;
}

Measurement measure(const Configuration& config, const ModelShapes& model, const at::Device& device, uint64_t seed,
    int warmup, int steps, bool profile) {
  auto params = model_parameters(model, device, seed);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (config.adamw) {
    optimizer = std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(1e-3));
  } else {
    optimizer = std::make_unique<Dash>(params, config.options);
  }
  auto step = [&] {
    optimizer->step();
    return params.back();
  };
  for (int i = 0; i < warmup; ++i) (void)time_it(step, 0, 1);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) times.push_back(time_it(step, 0, 1).median_ms);
  Measurement result;
  result.mean_ms = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  std::sort(times.begin(), times.end());
  result.per_step = {times[times.size() / 2], times.front(), times.back()};
  if (config.adamw) {
    result.state_bytes = adamw_state_bytes(static_cast<torch::optim::AdamW&>(*optimizer));
    return result;
  }
  auto& dash = static_cast<Dash&>(*optimizer);
  result.flops = dash_step_flops(dash, config.options);
  result.ceiling_gflops = stack_ceiling(dash, config.options.root().precision(), device);
  result.state_bytes = dash.state_bytes();
  if (profile) {
    dash.profile_phases(true);
    for (int i = 0; i < steps; ++i) dash.step();
    for (const auto& [phase, ms] : dash.phase_times_ms()) result.phases_ms[phase] = ms / steps;
    dash.profile_phases(false);
  }
  return result;
}

std::vector<Configuration> configurations(const Arguments& arguments, int64_t frequency) {
  auto base = DashOptions(1e-3).block_size(arguments.integer("block")).root_frequency(frequency).start_step(1);
  std::vector<Configuration> result;
  result.push_back({"adamw", true, base});
  if (arguments.text("baseline") == "1") {
    auto sequential = DashOptions(base).execution(Execution::Sequential)
        .root(InverseRootOptions().method(RootMethod::EVD));
    result.push_back({"sequential evd fp32", false, sequential});
  }
  for (const auto& method_name : arguments.list("methods")) {
    const auto method = parse_root_method(method_name);
    for (const auto& precision_name : arguments.list("precisions")) {
      const auto precision = parse_matmul_precision(precision_name);
      std::vector<std::string> scalings = arguments.list("scalings");
      if (method == RootMethod::EVD) scalings = {"fro"};  // EVD uses no spectral scaling
      for (const auto& scaling_name : scalings) {
        const auto scaling = parse_scaling(scaling_name);
        auto options = DashOptions(base).root(InverseRootOptions().method(method).scaling(scaling).precision(precision));
        result.push_back({"batched " + to_string(method) + " " + (method == RootMethod::EVD ? "-" : to_string(scaling)) +
            " " + to_string(precision), false, options});
      }
    }
  }
  return result;
}

}  // namespace

int run_step_bench(const std::vector<std::string>& args) {
  Arguments arguments(args, {
      {"preset", "llama-tiny"}, {"layers", "-1"}, {"shapes", ""}, {"block", "256"}, {"frequencies", "1,10"},
      {"methods", "evd,cn,ndb,chebyshev"}, {"scalings", "fro,pi,multi-pi"}, {"precisions", "fp32,fp16,bf16"},
      {"baseline", "1"}, {"warmup", "1"}, {"steps", "0"}, {"device", "cpu"}, {"json", ""}, {"profile", "0"},
      {"seed", "0"}});
  const auto model = arguments.text("shapes").empty()
      ? preset_model(arguments.text("preset"), arguments.integer("layers"))
      : parse_shapes(arguments.text("shapes"));
  const at::Device device(arguments.text("device"));
  const int warmup = static_cast<int>(arguments.integer("warmup"));
  const bool profile = arguments.text("profile") == "1";
  const auto seed = static_cast<uint64_t>(arguments.integer("seed"));

  std::cout << "dash-bench step: " << model.name << " (" << model.shapes.size() << " tensors, "
            << fixed(static_cast<double>(model.numel()) / 1e6, 1) << " M parameters), B = " << arguments.text("block")
            << ", device " << device << ", LibTorch threads " << at::get_num_threads() << "\n";
  nlohmann::json report;
  report["command"] = "step";
  report["model"] = model.name;
  report["parameters"] = model.numel();
  report["block_size"] = arguments.integer("block");
  report["device"] = device.str();
  report["rows"] = nlohmann::json::array();

  for (const auto& frequency_text : arguments.list("frequencies")) {
    const int64_t frequency = std::stoll(frequency_text);
    // Timed steps: a whole number of root periods, so the mean is the amortised cost.
    const int steps = arguments.integer("steps") > 0 ? static_cast<int>(arguments.integer("steps"))
                                                     : static_cast<int>(std::max<int64_t>(frequency, 3));
    std::cout << "\nf = " << frequency << ", " << warmup << " warm-up + " << steps << " timed steps\n";
    std::printf("%-30s %10s %9s %9s %9s %8s %8s %9s %8s %7s %9s %8s\n", "configuration", "ms/step", "median",
        "min", "max", "x seq", "x adamw", "GFLOP", "GFLOP/s", "%ceil", "state MB", "x adamw");
    double adamw_ms = 0.0, sequential_ms = 0.0;
    int64_t adamw_bytes = 0;
    for (const auto& config : configurations(arguments, frequency)) {
      auto m = measure(config, model, device, seed, warmup, steps, profile);
      if (config.adamw) {
        adamw_ms = m.mean_ms;
        adamw_bytes = m.state_bytes;
      }
      if (config.label.rfind("sequential", 0) == 0) sequential_ms = m.mean_ms;
      const double gflops = m.flops / (m.mean_ms * 1e6);
      std::printf("%-30s %10s %9s %9s %9s %8s %8s %9s %8s %7s %9s %8s\n", config.label.c_str(),
          fixed(m.mean_ms, 1).c_str(), fixed(m.per_step.median_ms, 1).c_str(), fixed(m.per_step.min_ms, 1).c_str(),
          fixed(m.per_step.max_ms, 1).c_str(), sequential_ms > 0 ? fixed(sequential_ms / m.mean_ms, 2).c_str() : "-",
          fixed(m.mean_ms / adamw_ms, 2).c_str(), config.adamw ? "-" : fixed(m.flops / 1e9, 2).c_str(),
          config.adamw ? "-" : fixed(gflops, 1).c_str(),
          config.adamw ? "-" : fixed(100.0 * gflops / m.ceiling_gflops, 1).c_str(),
          fixed(static_cast<double>(m.state_bytes) / 1e6, 1).c_str(),
          fixed(static_cast<double>(m.state_bytes) / static_cast<double>(adamw_bytes), 2).c_str());
      if (!m.phases_ms.empty()) {
        std::printf("    phases ms/step:");
        for (const auto& [phase, ms] : m.phases_ms) std::printf(" %s %s", phase.c_str(), fixed(ms, 1).c_str());
        std::printf("\n");
      }
      std::fflush(stdout);
      report["rows"].push_back({{"configuration", config.label}, {"frequency", frequency},
          {"mean_ms", m.mean_ms}, {"median_ms", m.per_step.median_ms}, {"min_ms", m.per_step.min_ms},
          {"max_ms", m.per_step.max_ms}, {"speedup_vs_sequential", sequential_ms > 0 ? sequential_ms / m.mean_ms : 0.0},
          {"ratio_to_adamw", m.mean_ms / adamw_ms}, {"flops_per_step", m.flops}, {"gflops", gflops},
          {"ceiling_gflops", m.ceiling_gflops}, {"state_bytes", m.state_bytes},
          {"state_ratio_to_adamw", static_cast<double>(m.state_bytes) / static_cast<double>(adamw_bytes)},
          {"phases_ms", m.phases_ms}});
    }
  }
  write_json_report(report, arguments.text("json"));
  return 0;
}

}  // namespace dash::bench
