// dash-bench solvers: speed and accuracy of the inverse-root solvers, and how
// close each comes to the batched-matmul ceiling of the same machine and shapes.
// With --warm-start 1 the matrices are factors one root period after a known
// start (an EMA of gradients), and warm-started EVD (InverseRootOptions::
// eigen_refresh_tolerance) starts from the start's eigenbasis, next to every
// method solving from scratch.

#include "solver_bench.h"

#include "arguments.h"
#include "report.h"
#include "timing.h"

#include <dash/dash.h>

#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dash::bench {
namespace {

struct Shape {
  int64_t count;
  int64_t b;
};

// Stack sizes keep each preset's total work per b similar on a small CPU; "full"
// is 4× "quick". The block sizes are the paper's range around B = 1024.
std::vector<Shape> preset_shapes(const std::string& preset) {
  if (preset == "quick") return {{16, 128}, {8, 256}, {2, 512}, {1, 1024}};
  if (preset == "full") return {{64, 128}, {32, 256}, {8, 512}, {4, 1024}};
  if (preset == "tiny") return {{2, 16}, {1, 32}};
  throw std::invalid_argument("unknown --preset '" + preset + "'; valid: quick, full, tiny");
}

struct Configuration {
  RootMethod method;
  Scaling scaling;
  MatmulPrecision precision;
};

std::vector<Configuration> configurations(const std::vector<std::string>& method_names) {
  std::vector<Configuration> result;
  const MatmulPrecision precisions[] = {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16};
  for (const auto& name : method_names) {
    auto method = parse_root_method(name);
    if (method == RootMethod::Auto) {
      throw std::invalid_argument(
          "--methods: auto is chosen per factor stack by the optimizer; "
          "dash-bench step --methods auto measures it");
    }
    for (auto precision : precisions) {
      if (!solver_traits(method).matmul_only) {  // a factorisation uses no spectral scaling
        result.push_back({method, Scaling::Frobenius, precision});
        continue;
      }
      for (auto scaling : {Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
        result.push_back({method, scaling, precision});
      }
    }
  }
  return result;
}

struct Settings {
  at::Device device = at::kCPU;
  int64_t p = 4;
  double condition = 1e3;
  double epsilon = 1e-10;
  int warmup = 1;
  int repetitions = 3;
  uint64_t seed = 0;
  bool warm_start = false;
  double ema_beta = 0.95;
  int64_t ema_steps = 10;
  std::vector<double> warm_tolerances;
  std::string float32_matmuls;  ///< IEEE or TF32 (--tf32)
};

// The matrices every row of one shape solves, and their float64 reference root.
// Warm-start mode: `input` is `start` after an EMA update.
struct Inputs {
  at::Tensor start;  ///< warm-start mode only: the factor one root period earlier
  at::Tensor input;
  at::Tensor reference;
};

Inputs make_inputs(const Shape& shape, const Settings& settings) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(settings.device);
  auto spectrum = testing::log_spaced_spectrum(shape.count, shape.b, settings.condition, settings.seed + shape.b);
  Inputs inputs;
  auto matrices = spectrum.matrices;
  if (settings.warm_start) {
    inputs.start = matrices.to(options);
    matrices = testing::ema_updated(spectrum, settings.ema_beta, settings.ema_steps, settings.seed + 7 * shape.b);
  }
  inputs.input = matrices.to(options);
  inputs.reference = testing::eigh_inverse_root(matrices, settings.epsilon, settings.p);
  return inputs;
}

std::map<MatmulPrecision, double> measure_ceilings(
    const Shape& shape, const Settings& settings, nlohmann::json& report) {
  std::map<MatmulPrecision, double> ceilings;
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
    std::string dtype;
    ceilings[precision] = bmm_gflops(
        shape.count, shape.b, matmul_dtype(precision), settings.device, settings.warmup, settings.repetitions, &dtype);
    report["ceilings"].push_back({{"N", shape.count}, {"b", shape.b}, {"precision", to_string(precision)},
        {"matmul_dtype", dtype}, {"gflops", ceilings[precision]}});
  }
  return ceilings;
}

// One measured solve. `gflops` is NaN where the work is data-dependent (a
// warm-started EVD keeps some bases and recomputes others).
struct Row {
  std::string method;
  std::string scaling;  ///< "-" where the method takes none
  MatmulPrecision precision;
  TimingSummary timing;
  double error;
  double gflops = std::numeric_limits<double>::quiet_NaN();
  double ceiling_fraction = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json extra = nlohmann::json::object();
};

Row solve_from_scratch(const Configuration& config, const Shape& shape, const Inputs& inputs, const Settings& settings,
    const std::map<MatmulPrecision, double>& ceilings) {
  // NewtonDB as the matmul iteration everywhere: by eigh it would be EVD's row.
  auto solver = InverseRootOptions()
                    .method(config.method)
                    .precision(config.precision)
                    .epsilon(settings.epsilon)
                    .scaling(SpectralScaleOptions().method(config.scaling))
                    .newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Matmuls));
  const bool uses_scaling = solver_traits(config.method).matmul_only;
  Row row{to_string(config.method), uses_scaling ? to_string(config.scaling) : "-", config.precision};
  row.timing =
      time_it([&] { return inverse_root(inputs.input, settings.p, solver); }, settings.warmup, settings.repetitions);
  row.error = testing::max_relative_error(inverse_root(inputs.input, settings.p, solver).cpu(), inputs.reference);
  row.gflops =
      inverse_root_flops(shape.count, shape.b, settings.p, solver, settings.device) / (row.timing.median_ms * 1e6);
  row.ceiling_fraction = row.gflops / ceilings.at(config.precision);
  return row;
}

// EVD warm-started from the start's eigenbasis: every repetition begins from the
// same basis (an Eigenbasis is replaced, not modified, by a solve).
Row solve_warm_started(double tolerance, const Inputs& inputs, const Settings& settings) {
  auto solver = InverseRootOptions()
                    .method(RootMethod::EVD)
                    .epsilon(settings.epsilon)
                    .eigen(EigenOptions().refresh_tolerance(tolerance));
  InverseRootWorkspace workspace;
  Eigenbasis start;
  (void)inverse_root(inputs.start, settings.p, solver, workspace, start);
  Eigenbasis last;
  at::Tensor root;
  auto solve = [&] {
    last = start;
    root = inverse_root(inputs.input, settings.p, solver, workspace, last);
    return root;
  };
  Row row{"evd-warm", "-", MatmulPrecision::FP32};
  row.timing = time_it(solve, settings.warmup, settings.repetitions);
  row.error = testing::max_relative_error(root.cpu(), inputs.reference);
  auto status = last.status.cpu();
  row.extra = {{"eigen_refresh_tolerance", tolerance}, {"kept", (status == 0).sum().item<int64_t>()},
      {"warm_started", (status == 1).sum().item<int64_t>()}, {"recomputed", (status == 2).sum().item<int64_t>()}};
  return row;
}

void print_row(const Shape& shape, const Row& row) {
  const auto gflops = std::isnan(row.gflops) ? std::string("-") : fixed(row.gflops, 1);
  const auto fraction =
      std::isnan(row.ceiling_fraction) ? std::string("-") : fixed(100.0 * row.ceiling_fraction, 1) + "%";
  std::printf("%5ld %5ld %-9s %-8s %-4s %10s %9s %8s %9s", static_cast<long>(shape.count), static_cast<long>(shape.b),
      row.method.c_str(), row.scaling.c_str(), to_string(row.precision).c_str(), fixed(row.timing.median_ms, 2).c_str(),
      scientific(row.error).c_str(), gflops.c_str(), fraction.c_str());
  if (row.extra.contains("kept")) {
    std::printf("  τ=%g: kept %ld, warm-started %ld, eigh %ld", row.extra["eigen_refresh_tolerance"].get<double>(),
        static_cast<long>(row.extra["kept"].get<int64_t>()),
        static_cast<long>(row.extra["warm_started"].get<int64_t>()),
        static_cast<long>(row.extra["recomputed"].get<int64_t>()));
  }
  std::printf("\n");
  std::fflush(stdout);
}

nlohmann::json to_json(const Shape& shape, const Row& row) {
  auto json = nlohmann::json{{"N", shape.count}, {"b", shape.b}, {"method", row.method},
      {"scaling", row.scaling == "-" ? "none" : row.scaling}, {"precision", to_string(row.precision)},
      {"median_ms", row.timing.median_ms}, {"min_ms", row.timing.min_ms}, {"max_ms", row.timing.max_ms},
      {"relative_error", row.error}, {"gflops", nullptr}, {"ceiling_fraction", nullptr}};
  if (!std::isnan(row.gflops)) json["gflops"] = row.gflops;
  if (!std::isnan(row.ceiling_fraction)) json["ceiling_fraction"] = row.ceiling_fraction;
  json.update(row.extra);
  return json;
}

Settings read_settings(const Arguments& arguments) {
  Settings settings;
  settings.device = at::Device(arguments.text("device"));
  settings.p = arguments.integer("p");
  settings.condition = arguments.real("cond");
  settings.epsilon = arguments.real("epsilon");
  settings.warmup = static_cast<int>(arguments.integer("warmup"));
  settings.repetitions = static_cast<int>(arguments.integer("reps"));
  settings.seed = static_cast<uint64_t>(arguments.integer("seed"));
  settings.warm_start = arguments.integer("warm-start") == 1;
  settings.ema_beta = arguments.real("ema-beta");
  settings.ema_steps = arguments.integer("ema-steps");
  settings.warm_tolerances = arguments.reals("eigen-tolerances");
  settings.float32_matmuls = set_float32_matmul_mode(arguments.text("tf32") == "1");
  return settings;
}

void print_header(const Settings& settings) {
  std::cout << "dash-bench solvers: device " << settings.device << ", LibTorch threads " << at::get_num_threads()
            << ", hardware threads " << std::thread::hardware_concurrency() << ", p = " << settings.p
            << ", spectrum log-spaced with condition " << scientific(settings.condition) << ", epsilon "
            << settings.epsilon << ", defaults otherwise (10 Newton steps, degree 40, 10 power steps × 16 vectors)\n"
            << "eigh/QR of a stack: " << lapack_plan_description(settings.device)
            << "; float32 matmuls: " << settings.float32_matmuls
            << "\nsolver products (fp32): " << solver_products_description(settings.device) << "\n";
  if (settings.warm_start) {
    std::cout << "warm start: each matrix after " << settings.ema_steps << " EMA steps (beta " << settings.ema_beta
              << ") of gradients with its own second moment; evd-warm starts from the eigenbasis before them\n";
  }
  std::cout << "\n";
  std::printf("%5s %5s %-9s %-8s %-4s %10s %9s %8s %9s\n", "N", "b", "method", "scaling", "prec", "median ms",
      "rel.err", "GFLOP/s", "%ceiling");
}

}  // namespace

int run_solver_bench(const std::vector<std::string>& args) {
  Arguments arguments(args,
      {{"preset", "quick"}, {"device", "cpu"}, {"p", integer_option("4", 1, 64)}, {"cond", real_option("1e3", 1)},
          {"methods", solver_method_names()}, {"warmup", integer_option("1", 0)}, {"reps", integer_option("3", 1)},
          {"json", output_file_option()}, {"epsilon", real_option("1e-10", 0)}, {"seed", integer_option("0", 0)},
          {"warm-start", integer_option("0", 0, 1)}, {"ema-beta", real_option("0.95", 0, 0.9999)},
          {"ema-steps", integer_option("10", 1)}, {"eigen-tolerances", real_list_option("0.02,0.05,0.1", 1e-12, 1)},
          {"tf32", integer_option("0", 0, 1)}});
  const auto shapes = preset_shapes(arguments.text("preset"));
  const auto settings = read_settings(arguments);
  const auto configs = configurations(arguments.list("methods"));
  print_header(settings);

  nlohmann::json report;
  report["command"] = "solvers";
  report["device"] = settings.device.str();
  report["p"] = settings.p;
  report["condition"] = settings.condition;
  report["epsilon"] = settings.epsilon;
  report["float32_matmuls"] = settings.float32_matmuls;
  report["solver_products"] = solver_products_description(settings.device);
  report["warmup"] = settings.warmup;
  report["repetitions"] = settings.repetitions;
  if (settings.warm_start) {
    report["warm_start"] = {{"ema_beta", settings.ema_beta}, {"ema_steps", settings.ema_steps}};
  }
  report["rows"] = nlohmann::json::array();
  report["ceilings"] = nlohmann::json::array();
  std::map<int64_t, std::pair<double, std::string>> fastest_accurate;  // b → (ms, config)

  for (const auto& shape : shapes) {
    const auto inputs = make_inputs(shape, settings);
    const auto ceilings = measure_ceilings(shape, settings, report);
    std::vector<Row> rows;
    for (const auto& config : configs) {
      rows.push_back(solve_from_scratch(config, shape, inputs, settings, ceilings));
      print_row(shape, rows.back());
    }
    for (double tolerance : settings.warm_start ? settings.warm_tolerances : std::vector<double>{}) {
      rows.push_back(solve_warm_started(tolerance, inputs, settings));
      print_row(shape, rows.back());
    }
    for (const auto& row : rows) {
      report["rows"].push_back(to_json(shape, row));
      auto& best = fastest_accurate.try_emplace(shape.b, std::numeric_limits<double>::infinity(), "none").first->second;
      if (row.error <= 1e-3 && row.timing.median_ms < best.first) {
        best = {row.timing.median_ms, row.method + "/" + row.scaling + "/" + to_string(row.precision)};
      }
    }
    std::printf("  matmul ceiling at N=%ld b=%ld: fp32 %.1f, fp16 %.1f, bf16 %.1f GFLOP/s\n",
        static_cast<long>(shape.count), static_cast<long>(shape.b), ceilings.at(MatmulPrecision::FP32),
        ceilings.at(MatmulPrecision::FP16), ceilings.at(MatmulPrecision::BF16));
  }

  std::cout << "\nfastest configuration with relative error <= 1e-3:\n";
  for (const auto& [b, best] : fastest_accurate) {
    std::cout << "  b = " << b << ": " << best.second
              << (best.second == "none" ? "" : " (" + fixed(best.first, 2) + " ms)") << "\n";
    report["fastest_within_1e-3"][std::to_string(b)] = best.second;
  }
  write_json_report(report, arguments.text("json"));
  return 0;
}

}  // namespace dash::bench
