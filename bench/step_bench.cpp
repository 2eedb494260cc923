// dash-bench step: the cost of one optimizer step on real model shapes — LibTorch
// AdamW, DASH sequential with EVD (the Distributed Shampoo baseline) and batched
// DASH for every root method × scaling × precision.

#include "step_bench.h"

#include "arguments.h"
#include "report.h"
#include "model_shapes.h"
#include "timing.h"

#include "common/memory_peak.h"
#include "kernels/stack_blas.h"
#include "linalg/newton_schulz.h"

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
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

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
  double non_root_median_ms = 0.0;              // 0 when every timed step computed roots
  double root_mean_ms = 0.0;                    // 0 when no timed step did
  double flops = 0.0;                           // per step, amortised
  double factor_flops = 0.0;                    // per step: G Gᵀ and Gᵀ G (syrk: one triangle each)
  double preconditioning_flops = 0.0;           // per step: L̄ Ĝ R̄
  double ceiling_gflops = 0.0;                  // bmm ceiling in the roots' precision
  double fp32_ceiling_gflops = 0.0;             // the factor updates are always float32
  double preconditioning_ceiling_gflops = 0.0;  // bmm ceiling in the preconditioning precision
  int64_t state_bytes = 0;
  int64_t workspace_bytes = 0;              // kept across steps besides the state (DashDiagnostics)
  int64_t workspace_limit_bytes = 0;        // the budget in force; 0: none
  int64_t step_peak_bytes = 0;              // the largest peak of a timed step's temporaries (allocator hook)
  std::map<std::string, double> phases_ms;  // per step, with --profile
  std::string root_choices;  // Execution::Auto, RootMethod::Auto: what each stack chose; warm EVD: roots kept/warm/eigh

  // The non-root step's floor: its matmul FLOPs at the bmm ceilings measured in
  // their precisions (the factor updates' float32, the preconditioning's own).
  double factors_floor_ms() const {
    return fp32_ceiling_gflops > 0.0 ? factor_flops / (fp32_ceiling_gflops * 1e6) : 0.0;
  }
  double preconditioning_floor_ms() const {
    return preconditioning_ceiling_gflops > 0.0 ? preconditioning_flops / (preconditioning_ceiling_gflops * 1e6) : 0.0;
  }
  double floor_ms() const { return factors_floor_ms() + preconditioning_floor_ms(); }
};

// Matmul FLOPs of the non-root part of one DASH step, from the stack shapes: the
// factor updates G Gᵀ and Gᵀ G, 2·r·c·(r + c) per block as GEMMs, or r·c·(r + c + 2)
// where syrk forms one triangle of each (kernels::stack_syrk_plan), and the
// preconditioning L̄ Ĝ R̄, 2·r·c·(r + c) (one-sided blocks: 2·r²·c, r·(r + 1)·c).
// Spectral descent has no factors: its preconditioning is Newton–Schulz
// (linalg::newton_schulz_flops, one triangle of A and A² where a CPU BLAS forms them).
void count_step_flops(const Dash& optimizer, const DashOptions& options, const at::Device& device, Measurement& m) {
  const bool syrk = kernels::stack_syrk_plan(device).one_triangle;
  for (const auto& stack : optimizer.diagnostics().block_stacks) {
    if (options.preconditioner() == PreconditionerType::SpectralDescent) {
      const bool one_triangle = options.preconditioning_precision() == MatmulPrecision::FP32 && syrk;
      m.preconditioning_flops += static_cast<double>(stack.count) * linalg::newton_schulz_flops(stack.rows, stack.cols,
                                                                        options.newton_schulz_steps(), one_triangle);
      continue;
    }
    const double r = static_cast<double>(stack.rows), c = static_cast<double>(stack.cols);
    const double per_block = stack.one_sided ? 2.0 * r * r * c : 2.0 * r * c * (r + c);
    const double per_block_syrk = stack.one_sided ? r * (r + 1.0) * c : r * c * (r + c + 2.0);
    m.factor_flops += (syrk ? per_block_syrk : per_block) * static_cast<double>(stack.count);
    m.preconditioning_flops += per_block * static_cast<double>(stack.count);
  }
}

// All FLOPs of a step, amortised: the non-root matmuls plus the inverse roots every
// f steps, as `device` runs them (one triangle of the solvers' symmetric products on
// a CPU, solver_cost.h).
double dash_step_flops(
    const Dash& optimizer, const DashOptions& options, const Measurement& m, const at::Device& device) {
  double flops = m.factor_flops + m.preconditioning_flops;
  for (const auto& stack : optimizer.diagnostics().factor_stacks) {
    if (stack.root_method == RootMethod::Auto) continue;  // not chosen yet: no root computed
    flops += inverse_root_flops(stack.count, stack.size, stack.root,
                 InverseRootOptions(options.root()).method(stack.root_method), device) /
             static_cast<double>(options.root_frequency());
  }
  return flops;
}

// The bmm ceiling on the factor stacks in use: Σ FLOPs / Σ time of one (N, b, b)
// bmm per stack, in the configuration's precision.
// (A family without factors: one of each block stack's (N, m, m), m the smaller side.)
double stack_ceiling(const Dash& optimizer, MatmulPrecision precision, const at::Device& device) {
  const auto diagnostics = optimizer.diagnostics();
  std::vector<std::pair<int64_t, int64_t>> stacks;  // (count, size)
  for (const auto& stack : diagnostics.factor_stacks) stacks.emplace_back(stack.count, stack.size);
  if (stacks.empty()) {
    for (const auto& stack : diagnostics.block_stacks)
      stacks.emplace_back(stack.count, std::min(stack.rows, stack.cols));
  }
  double flops = 0.0, seconds = 0.0;
  for (const auto& [count, size] : stacks) {
    const double stack_flops = 2.0 * static_cast<double>(count) * std::pow(static_cast<double>(size), 3);
    flops += stack_flops;
    seconds += stack_flops / (bmm_gflops(count, size, matmul_dtype(precision), device, 1, 3) * 1e9);
  }
  return seconds > 0.0 ? flops / seconds / 1e9 : 0.0;
}

// The precisions whose bmm ceilings a configuration's figures need: float32 (the
// factor updates), the roots' and the preconditioning's.
std::set<MatmulPrecision> precisions_in_use(const DashOptions& options) {
  return {MatmulPrecision::FP32, options.root().precision(), options.preconditioning_precision()};
}

// Raises m's ceilings to those of `ceilings` (per precision, covering precisions_in_use()).
void take_ceilings(Measurement& m, const DashOptions& options, const std::map<MatmulPrecision, double>& ceilings) {
  m.ceiling_gflops = std::max(m.ceiling_gflops, ceilings.at(options.root().precision()));
  m.fp32_ceiling_gflops = std::max(m.fp32_ceiling_gflops, ceilings.at(MatmulPrecision::FP32));
  m.preconditioning_ceiling_gflops =
      std::max(m.preconditioning_ceiling_gflops, ceilings.at(options.preconditioning_precision()));
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

int64_t adamw_state_bytes(const torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& entry : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
    bytes += state.exp_avg().nbytes() + state.exp_avg_sq().nbytes();
  }
  return bytes;
}

// One configuration being measured: its own parameters (same seed, so the same
// start and gradients for every configuration) and optimizer, and its step times.
struct Run {
  Configuration config;
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  int64_t steps_taken = 0;
  std::vector<double> root_times, other_times;
  int64_t peak_bytes = 0;  // of the timed steps' temporaries, the largest
};

Run start_run(const Configuration& config, const ModelShapes& model, const at::Device& device, uint64_t seed) {
  Run run{config, model_parameters(model, device, seed), nullptr, 0, {}, {}, 0};
  if (config.adamw) {
    // LibTorch's default decay (0.01) unless --weight-decay sets one for every optimizer.
    auto adamw = torch::optim::AdamWOptions(1e-3);
    if (config.options.weight_decay() > 0.0) adamw.weight_decay(config.options.weight_decay());
    run.optimizer = std::make_unique<torch::optim::AdamW>(run.params, adamw);
  } else {
    run.optimizer = std::make_unique<Dash>(run.params, config.options);
  }
  return run;
}

// One optimizer step; timed (and filed as a root or non-root step) unless warming
// up, and then its peak of temporary memory measured by the allocators' hook.
void step_run(Run& run, bool timed) {
  int64_t peak = 0;
  const auto ms = time_it(
      [&] {
        const common::MeasureMemoryPeak measure;
        run.optimizer->step();
        peak = measure.peak_bytes();
        return run.params.back();
      },
      0, 1)
                      .median_ms;
  const int64_t t = ++run.steps_taken;
  if (!timed) return;
  run.peak_bytes = std::max(run.peak_bytes, peak);
  const auto& options = run.config.options;
  // Roots are due at t_start and every f steps after it.
  const bool root_step =
      !run.config.adamw && t >= options.start_step() && (t - options.start_step()) % options.root_frequency() == 0;
  (root_step ? run.root_times : run.other_times).push_back(ms);
}

Measurement finish_run(Run& run, const at::Device& device, int steps, bool profile) {
  std::vector<double> times = run.root_times;
  times.insert(times.end(), run.other_times.begin(), run.other_times.end());
  Measurement result;
  result.mean_ms = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  result.non_root_median_ms = median(run.other_times);
  result.root_mean_ms = run.root_times.empty() ? 0.0
                                               : std::accumulate(run.root_times.begin(), run.root_times.end(), 0.0) /
                                                     static_cast<double>(run.root_times.size());
  std::sort(times.begin(), times.end());
  result.per_step = {times[times.size() / 2], times.front(), times.back()};
  result.step_peak_bytes = run.peak_bytes;
  if (run.config.adamw) {
    result.state_bytes = adamw_state_bytes(static_cast<torch::optim::AdamW&>(*run.optimizer));
    return result;
  }
  auto& dash = static_cast<Dash&>(*run.optimizer);
  count_step_flops(dash, run.config.options, device, result);
  result.flops = dash_step_flops(dash, run.config.options, result, device);
  std::map<MatmulPrecision, double> ceilings;
  for (const auto precision : precisions_in_use(run.config.options)) {
    ceilings[precision] = stack_ceiling(dash, precision, device);
  }
  take_ceilings(result, run.config.options, ceilings);
  result.state_bytes = dash.state_bytes();
  const auto diagnostics = dash.diagnostics();  // reads counters back from the device: once
  result.workspace_bytes = diagnostics.workspace_bytes;
  result.workspace_limit_bytes = diagnostics.workspace_limit_bytes;
  const bool auto_method = run.config.options.root().method() == RootMethod::Auto;
  if (run.config.options.execution() == Execution::Auto || auto_method) {
    for (const auto& stack : diagnostics.factor_stacks) {
      auto& choice = result.root_choices;
      choice += (choice.empty() ? "" : "; ") + std::to_string(stack.size) + "² ×" + std::to_string(stack.count);
      if (auto_method) {
        choice += " " + to_string(stack.root_method) + " (";
        for (const auto& trial : stack.root_method_trials) {
          choice += (&trial == &stack.root_method_trials.front() ? "" : ", ") + to_string(trial.method) + " " +
                    fixed(trial.milliseconds, 0) + " ms error " + scientific(trial.error);
        }
        choice += ")";
      }
      if (run.config.options.execution() == Execution::Auto) {
        choice += std::string(" ") +
                  (stack.execution == Execution::Sequential ? "per block" : to_string(stack.execution)) +
                  " (timed: batched " + fixed(stack.calibrated_batched_ms, 0) + " ms, per block " +
                  fixed(stack.calibrated_per_block_ms, 0) + " ms)";
      }
    }
  }
  int64_t kept = 0, warm_started = 0, recomputed = 0;
  for (const auto& stack : diagnostics.factor_stacks) {
    kept += stack.roots_kept;
    warm_started += stack.roots_warm_started;
    recomputed += stack.roots_recomputed;
  }
  if (kept + warm_started + recomputed > 0) {  // warm-started eigenbases, over all root computations so far
    result.root_choices += (result.root_choices.empty() ? "" : "; ") + std::string("eigenbases kept ") +
                           std::to_string(kept) + ", warm-started " + std::to_string(warm_started) + ", eigh " +
                           std::to_string(recomputed);
  }
  if (profile) {
    dash.profile_phases(true);
    for (int i = 0; i < steps; ++i) dash.step();
    for (const auto& [phase, ms] : dash.phase_times_ms()) result.phases_ms[phase] = ms / steps;
    dash.profile_phases(false);
  }
  return result;
}

// Measures every configuration. One after another by default; with `interleave`
// all optimizers live at once and take their steps in turns (round robin), so
// that a slow spell of a noisy machine hits every configuration alike and the
// ratios between them stay meaningful (memory: all states at once).
std::vector<Measurement> measure_all(const std::vector<Configuration>& configs, const ModelShapes& model,
    const at::Device& device, uint64_t seed, int warmup, int steps, bool profile, bool interleave) {
  std::vector<Measurement> results;
  if (!interleave) {
    for (const auto& config : configs) {
      auto run = start_run(config, model, device, seed);
      for (int i = 0; i < warmup; ++i) step_run(run, false);
      for (int i = 0; i < steps; ++i) step_run(run, true);
      results.push_back(finish_run(run, device, steps, profile));
      // The table waits for every configuration; a run cut short still shows these.
      std::cerr << "measured " << config.label << ": " << fixed(results.back().mean_ms, 1) << " ms/step" << std::endl;
    }
    return results;
  }
  std::vector<Run> runs;
  for (const auto& config : configs) runs.push_back(start_run(config, model, device, seed));
  // The ceiling is measured in every round too (once per precision in use) and the
  // best is kept for all configurations alike: a floor taken in one slow moment
  // would make that configuration alone look close to it.
  std::map<MatmulPrecision, double> best_ceiling;
  for (int i = 0; i < warmup + steps; ++i) {
    for (auto& run : runs) step_run(run, i >= warmup);
    std::set<MatmulPrecision> measured;
    for (auto& run : runs) {
      if (run.config.adamw) continue;
      for (const auto precision : precisions_in_use(run.config.options)) {
        if (!measured.insert(precision).second) continue;
        auto& best = best_ceiling[precision];
        best = std::max(best, stack_ceiling(static_cast<Dash&>(*run.optimizer), precision, device));
      }
    }
  }
  for (auto& run : runs) {
    results.push_back(finish_run(run, device, steps, profile));
    if (!run.config.adamw) {
      take_ceilings(results.back(), run.config.options, best_ceiling);
    }
  }
  return results;
}

// A row label's NewtonDB evaluation: none for the matmul iteration.
std::string evaluation_label(NewtonDBEvaluation evaluation) {
  return evaluation == NewtonDBEvaluation::Matmuls ? std::string() : " by " + to_string(evaluation);
}

// The root options a method is measured with, each with its label: EVD once per
// eigen_refresh_tolerance (warm-started eigenbases), NDB once per evaluation and step polynomial
// (and RootMethod::Auto once per evaluation of its NDB trial),
// CN and NDB once per Newton step count.
std::vector<std::pair<std::string, InverseRootOptions>> method_variants(const Arguments& arguments, RootMethod method) {
  const auto root = InverseRootOptions().method(method);
  std::vector<std::pair<std::string, InverseRootOptions>> variants;
  if (method == RootMethod::EVD) {
    for (const auto& tolerance_name : arguments.list("eigen-tolerances")) {
      const double tolerance = std::stod(tolerance_name);
      variants.emplace_back(tolerance > 0.0 ? " warm τ=" + tolerance_name : std::string(),
          InverseRootOptions(root).eigen(EigenOptions().refresh_tolerance(tolerance)));
    }
  } else if (method == RootMethod::NewtonDB) {
    for (const auto& evaluation_name : arguments.list("ndb-evaluations")) {
      const auto evaluation = parse_newton_db_evaluation(evaluation_name);
      for (const auto& polynomial_name : arguments.list("ndb-polynomials")) {
        const auto polynomial = parse_newton_db_polynomial(polynomial_name);
        variants.emplace_back(
            evaluation_label(evaluation) +
                (polynomial == NewtonDBPolynomial::NewtonSchulz
                        ? std::string()
                        : " " + to_string(polynomial) + " ℓ=" + arguments.text("minimax-interval-min")),
            InverseRootOptions(root).newton_db(NewtonDBOptions()
                                                   .polynomial(polynomial)
                                                   .interval_min(arguments.real("minimax-interval-min"))
                                                   .evaluation(evaluation)));
      }
    }
  } else if (method == RootMethod::Auto) {  // its NewtonDB trial once per evaluation
    for (const auto& evaluation_name : arguments.list("ndb-evaluations")) {
      const auto evaluation = parse_newton_db_evaluation(evaluation_name);
      variants.emplace_back(
          evaluation_label(evaluation), InverseRootOptions(root).newton_db(NewtonDBOptions().evaluation(evaluation)));
    }
  } else {
    variants.emplace_back(std::string(), root);
  }
  if (solver_traits(method).newton_iteration) {  // once per Newton step count
    std::vector<std::pair<std::string, InverseRootOptions>> per_step_count;
    for (const int64_t steps : arguments.integers("newton-steps")) {
      for (const auto& variant : variants) {
        per_step_count.emplace_back(
            variant.first + (steps == NewtonOptions().steps() ? "" : " " + std::to_string(steps) + " steps"),
            InverseRootOptions(variant.second).newton(NewtonOptions(variant.second.newton()).steps(steps)));
      }
    }
    variants = std::move(per_step_count);
  }
  return variants;
}

constexpr const char* kSequentialBaselineLabel = "sequential evd fp32";

// A workspace_limit other than the library's default, for a configuration's label:
// " ws none", " ws 0.05" (of the state), " ws 64MB".
std::string workspace_label(double limit) {
  if (limit == DashOptions().workspace_limit()) return "";
  if (limit == 0.0) return " ws none";
  return " ws " + (limit < 1.0 ? fixed(limit, 2) : fixed(limit / 1e6, 0) + "MB");
}

void add_family_configurations(const Arguments& arguments, const DashOptions& base, const std::string& family_label,
    std::vector<Configuration>& result);

std::vector<Configuration> configurations(const Arguments& arguments, int64_t frequency) {
  auto base = DashOptions(1e-3)
                  .block_size(arguments.integer("block"))
                  .root_frequency(frequency)
                  .start_step(1)
                  .weight_decay(arguments.real("weight-decay"));
  std::vector<Configuration> result;
  result.push_back({"adamw", true, base});
  if (arguments.text("baseline") == "1") {
    auto sequential =
        DashOptions(base).execution(Execution::Sequential).root(InverseRootOptions().method(RootMethod::EVD));
    result.push_back({kSequentialBaselineLabel, false, sequential});
  }
  for (const auto& family_name : arguments.list("preconditioners")) {
    const auto family = parse_preconditioner_type(family_name);
    // Shampoo's rows keep the labels they had before there were families.
    const auto family_label = family == PreconditionerType::Shampoo ? std::string() : " " + family_name;
    add_family_configurations(arguments, DashOptions(base).preconditioner(family), family_label, result);
  }
  return result;
}

// One family's DASH configurations: every combination of the swept options.
void add_family_configurations(const Arguments& arguments, const DashOptions& base, const std::string& family_label,
    std::vector<Configuration>& result) {
  // A family without roots takes none of the root sweeps, and its labels name none.
  const bool roots = preconditioner_traits(base.preconditioner()).inverse_roots;
  const auto methods = roots ? arguments.list("methods") : std::vector<std::string>{to_string(base.root().method())};
  for (const auto& method_name : methods) {
    const auto method = parse_root_method(method_name);
    std::vector<std::string> scalings = arguments.list("scalings");
    // A factorisation uses no spectral scaling (Auto's matmul trials take the scalings).
    if (!roots || (method != RootMethod::Auto && !solver_traits(method).matmul_only)) scalings = {"fro"};
    const auto variants = roots ? method_variants(arguments, method)
                                : std::vector<std::pair<std::string, InverseRootOptions>>{{"", base.root()}};
    const auto precisions = roots ? arguments.list("precisions") : std::vector<std::string>{"fp32"};
    for (const auto& precision_name : precisions) {
      const auto precision = parse_matmul_precision(precision_name);
      for (const auto& scaling_name : scalings) {
        const auto scaling = parse_scaling(scaling_name);
        for (const auto& [variant_label, root] : variants) {
          for (const auto& execution_name : arguments.list("executions")) {
            const auto execution = parse_execution(execution_name);
            auto root_options = InverseRootOptions(root).precision(precision);
            root_options.scaling().method(scaling);
            for (const auto& preconditioning_name : arguments.list("preconditioning-precisions")) {
              const auto preconditioning = parse_matmul_precision(preconditioning_name);
              for (const double limit : arguments.reals("workspace-limits")) {
                for (const auto& state_name : arguments.list("state-precisions")) {
                  const auto state = parse_matmul_precision(state_name);
                  auto options = DashOptions(base)
                                     .execution(execution)
                                     .root(root_options)
                                     .preconditioning_precision(preconditioning)
                                     .workspace_limit(limit)
                                     .root_precision(state)
                                     .moment_precision(state);
                  const auto root_label = !roots ? std::string()
                                                 : " " + to_string(method) + variant_label + " " +
                                                       (method == RootMethod::EVD ? "-" : to_string(scaling)) + " " +
                                                       to_string(precision);
                  result.push_back(
                      {to_string(execution) + family_label + root_label +
                              (preconditioning == MatmulPrecision::FP32 ? "" : " pc " + to_string(preconditioning)) +
                              workspace_label(limit) +
                              (state == MatmulPrecision::FP32 ? "" : " roots+moments " + to_string(state)),
                          false, options});
                }
              }
            }
          }
        }
      }
    }
  }
}

// "x seq" compares a configuration with the same one run per block
// (Execution::Sequential) where that was measured too (--executions with
// sequential), else with the per-block EVD baseline (--baseline 1). Returns the
// reference's label and mean ms; ("", 0) if there is neither.
std::pair<std::string, double> sequential_reference(
    const std::string& label, const std::map<std::string, double>& mean_ms_of) {
  if (label.rfind("adamw", 0) == 0) return {"", 0.0};
  const auto space = label.find(' ');
  const auto same_per_block = mean_ms_of.find("sequential" + label.substr(space));
  if (same_per_block != mean_ms_of.end()) return {same_per_block->first, same_per_block->second};
  const auto baseline = mean_ms_of.find(kSequentialBaselineLabel);
  if (baseline != mean_ms_of.end()) return {baseline->first, baseline->second};
  return {"", 0.0};
}

// Builds each DASH configuration once for a probe parameter: an option out of
// range is an error now, not after the configurations before it were measured.
void check_configurations(const std::vector<Configuration>& configs) {
  const auto probe = at::zeros({2, 2}).set_requires_grad(true);
  for (const auto& config : configs) {
    if (!config.adamw) Dash check({probe}, config.options);
  }
}

}  // namespace

int run_step_bench(const std::vector<std::string>& args) {
  Arguments arguments(args,
      {{"preset", "llama-tiny"}, {"layers", integer_option("-1", -1)}, {"shapes", ""},
          {"block", integer_option("256", 1)}, {"frequencies", integer_list_option("1,10", 1)},
          {"preconditioners", preconditioner_names()}, {"methods", solver_method_names()},
          {"scalings", "fro,pi,multi-pi"}, {"precisions", "fp32,fp16,bf16"}, {"baseline", integer_option("1", 0, 1)},
          {"warmup", integer_option("1", 0)}, {"steps", integer_option("0", 0)}, {"device", "cpu"},
          {"json", output_file_option()}, {"profile", integer_option("0", 0, 1)}, {"seed", integer_option("0", 0)},
          {"interleave", integer_option("0", 0, 1)}, {"executions", "batched,auto"},
          {"eigen-tolerances", real_list_option("0", 0, 1)}, {"ndb-polynomials", "newton-schulz"},
          {"ndb-evaluations", "matmuls"}, {"minimax-interval-min", real_option("1e-6", 1e-12, 0.5)},
          {"tf32", integer_option("0", 0, 1)}, {"newton-steps", integer_list_option("10", 1)},
          {"preconditioning-precisions", "fp32"}, {"weight-decay", real_option("0", 0)},
          {"workspace-limits", real_list_option("0.1", 0, 1e18)}, {"state-precisions", "fp32"}});
  const auto float32_matmuls = set_float32_matmul_mode(arguments.text("tf32") == "1");
  // Every configuration's names and options, before anything is measured.
  check_configurations(configurations(arguments, 1));
  if (arguments.given("shapes") && (arguments.given("preset") || arguments.given("layers"))) {
    throw std::invalid_argument("give --shapes or --preset (with --layers), not both: --shapes replaces the preset");
  }
  const auto model = arguments.given("shapes") ? parse_shapes(arguments.text("shapes"))
                                               : preset_model(arguments.text("preset"), arguments.integer("layers"));
  const at::Device device(arguments.text("device"));
  check_model_fits(model, device);
  const int warmup = static_cast<int>(arguments.integer("warmup"));
  const bool profile = arguments.text("profile") == "1";
  const auto seed = static_cast<uint64_t>(arguments.integer("seed"));

  std::cout << "dash-bench step: " << model.name << " (" << model.shapes.size() << " tensors, "
            << fixed(static_cast<double>(model.numel()) / 1e6, 1) << " M parameters), B = " << arguments.text("block")
            << ", device " << device << ", LibTorch threads " << at::get_num_threads() << "\n"
            << "eigh/QR of a stack: " << lapack_plan_description(device) << "; float32 matmuls: " << float32_matmuls
            << "\nfactor updates: " << kernels::stack_syrk_plan(device).description
            << "\nsolver products (fp32): " << solver_products_description(device)
            << std::endl;  // before a long run, and whatever becomes of it
  nlohmann::json report;
  report["command"] = "step";
  report["model"] = model.name;
  report["parameters"] = model.numel();
  report["block_size"] = arguments.integer("block");
  report["device"] = device.str();
  report["stack_lapack"] = lapack_plan_description(device);
  report["float32_matmuls"] = float32_matmuls;
  report["factor_updates"] = kernels::stack_syrk_plan(device).description;
  report["solver_products"] = solver_products_description(device);
  report["rows"] = nlohmann::json::array();

  for (const int64_t frequency : arguments.integers("frequencies")) {
    // Timed steps: a whole number of root periods, so the mean is the amortised cost.
    const int steps = arguments.integer("steps") > 0 ? static_cast<int>(arguments.integer("steps"))
                                                     : static_cast<int>(std::max<int64_t>(frequency, 3));
    std::cout << "\nf = " << frequency << ", " << warmup << " warm-up + " << steps << " timed steps" << std::endl;
    if (profile && !device.is_cpu()) {
      std::cout << "(phases on " << device << ": host time issuing each phase, not device time; the phase that "
                << "waits for the device (the gradient check reads back in copies) absorbs the work queued before "
                << "it)" << std::endl;
    }
    std::printf("%-30s %9s %9s %9s %8s %7s %7s %8s %8s %7s %8s %8s %8s %8s\n", "configuration", "ms/step", "non-root",
        "root", "floor", "x floor", "x seq", "x adamw", "GFLOP/s", "%ceil", "state MB", "work MB", "peak MB",
        "limit MB");
    const auto configs = configurations(arguments, frequency);
    const auto measurements =
        measure_all(configs, model, device, seed, warmup, steps, profile, arguments.text("interleave") == "1");
    double adamw_ms = 0.0;
    std::map<std::string, double> mean_ms_of;
    for (size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].adamw) adamw_ms = measurements[c].mean_ms;
      mean_ms_of[configs[c].label] = measurements[c].mean_ms;
    }
    for (size_t c = 0; c < configs.size(); ++c) {
      const auto& config = configs[c];
      auto m = measurements[c];
      const auto reference = sequential_reference(config.label, mean_ms_of);
      const std::string& sequential_label = reference.first;
      const double sequential_ms = reference.second;
      const double gflops = m.flops / (m.mean_ms * 1e6);
      auto or_dash = [&](bool known, const std::string& text) { return known ? text : std::string("-"); };
      std::printf("%-30s %9s %9s %9s %8s %7s %7s %8s %8s %7s %8s %8s %8s %8s\n", config.label.c_str(),
          fixed(m.mean_ms, 1).c_str(), or_dash(m.non_root_median_ms > 0, fixed(m.non_root_median_ms, 1)).c_str(),
          or_dash(m.root_mean_ms > 0, fixed(m.root_mean_ms, 1)).c_str(),
          or_dash(!config.adamw, fixed(m.floor_ms(), 1)).c_str(),
          or_dash(!config.adamw && m.non_root_median_ms > 0, fixed(m.non_root_median_ms / m.floor_ms(), 2)).c_str(),
          or_dash(sequential_ms > 0, fixed(sequential_ms / m.mean_ms, 2)).c_str(),
          fixed(m.mean_ms / adamw_ms, 2).c_str(), or_dash(!config.adamw, fixed(gflops, 1)).c_str(),
          or_dash(!config.adamw, fixed(100.0 * gflops / m.ceiling_gflops, 1)).c_str(),
          fixed(static_cast<double>(m.state_bytes) / 1e6, 1).c_str(),
          fixed(static_cast<double>(m.workspace_bytes) / 1e6, 1).c_str(),
          fixed(static_cast<double>(m.step_peak_bytes) / 1e6, 1).c_str(),
          or_dash(m.workspace_limit_bytes > 0, fixed(static_cast<double>(m.workspace_limit_bytes) / 1e6, 1)).c_str());
      if (!m.root_choices.empty()) std::printf("    roots: %s\n", m.root_choices.c_str());
      if (!m.phases_ms.empty()) {
        std::printf("    phases ms/step:");
        for (const auto& [phase, ms] : m.phases_ms) std::printf(" %s %s", phase.c_str(), fixed(ms, 1).c_str());
        const double factors_floor = m.factors_floor_ms();
        const double preconditioning_floor = m.preconditioning_floor_ms();
        const auto ratio = [](double ms, double floor) { return floor > 0.0 ? "x" + fixed(ms / floor, 2) : "-"; };
        std::printf("\n    vs floor: factors %s / %s ms (%s), preconditioning %s / %s ms (%s)\n",
            fixed(m.phases_ms["factors"], 1).c_str(), fixed(factors_floor, 1).c_str(),
            ratio(m.phases_ms["factors"], factors_floor).c_str(), fixed(m.phases_ms["preconditioning"], 1).c_str(),
            fixed(preconditioning_floor, 1).c_str(),
            ratio(m.phases_ms["preconditioning"], preconditioning_floor).c_str());
      }
      std::fflush(stdout);
      report["rows"].push_back({{"configuration", config.label}, {"frequency", frequency}, {"mean_ms", m.mean_ms},
          {"median_ms", m.per_step.median_ms}, {"min_ms", m.per_step.min_ms}, {"max_ms", m.per_step.max_ms},
          {"non_root_median_ms", m.non_root_median_ms}, {"root_step_ms", m.root_mean_ms}, {"floor_ms", m.floor_ms()},
          {"floor_ratio", m.floor_ms() > 0 && m.non_root_median_ms > 0 ? m.non_root_median_ms / m.floor_ms() : 0.0},
          {"speedup_vs_sequential", sequential_ms > 0 ? sequential_ms / m.mean_ms : 0.0},
          {"sequential_reference", sequential_label}, {"ratio_to_adamw", m.mean_ms / adamw_ms},
          {"flops_per_step", m.flops}, {"factor_flops", m.factor_flops},
          {"preconditioning_flops", m.preconditioning_flops}, {"gflops", gflops}, {"ceiling_gflops", m.ceiling_gflops},
          {"fp32_ceiling_gflops", m.fp32_ceiling_gflops},
          {"preconditioning_ceiling_gflops", m.preconditioning_ceiling_gflops}, {"state_bytes", m.state_bytes},
          {"workspace_bytes", m.workspace_bytes}, {"workspace_limit_bytes", m.workspace_limit_bytes},
          {"step_peak_bytes", m.step_peak_bytes}, {"phases_ms", m.phases_ms}, {"root_choices", m.root_choices}});
    }
  }
  write_json_report(report, arguments.text("json"));
  return 0;
}

}  // namespace dash::bench
