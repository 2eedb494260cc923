// dash-bench solvers: speed and accuracy of the inverse-root solvers, and how
// close each comes to the batched-matmul ceiling of the same machine and shapes.

#include "solver_bench.h"

#include "arguments.h"
#include "report.h"
#include "timing.h"

#include <dash/dash.h>

#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

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
      if (method == RootMethod::EVD) {  // EVD uses no spectral scaling
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

}  // namespace

int run_solver_bench(const std::vector<std::string>& args) {
  Arguments arguments(args,
      {{"preset", "quick"}, {"device", "cpu"}, {"p", integer_option("4", 1, 64)}, {"cond", real_option("1e3", 1)},
          {"methods", "evd,cn,ndb,chebyshev"}, {"warmup", integer_option("1", 0)}, {"reps", integer_option("3", 1)},
          {"json", output_file_option()}, {"epsilon", real_option("1e-10", 0)}, {"seed", integer_option("0", 0)}});
  const auto shapes = preset_shapes(arguments.text("preset"));
  const at::Device device(arguments.text("device"));
  const int64_t p = arguments.integer("p");
  const double condition = arguments.real("cond");
  const double epsilon = arguments.real("epsilon");
  const int warmup = static_cast<int>(arguments.integer("warmup"));
  const int repetitions = static_cast<int>(arguments.integer("reps"));
  const auto seed = static_cast<uint64_t>(arguments.integer("seed"));
  const auto configs = configurations(arguments.list("methods"));
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);

  std::cout << "dash-bench solvers: device " << device << ", LibTorch threads " << at::get_num_threads()
            << ", hardware threads " << std::thread::hardware_concurrency() << ", p = " << p
            << ", spectrum log-spaced with condition " << scientific(condition) << ", epsilon " << epsilon
            << ", defaults otherwise (10 Newton steps, degree 40, 10 power steps × 16 vectors)\n\n";
  std::printf("%5s %5s %-9s %-8s %-4s %10s %9s %8s %9s\n", "N", "b", "method", "scaling", "prec", "median ms",
      "rel.err", "GFLOP/s", "%ceiling");

  nlohmann::json report;
  report["command"] = "solvers";
  report["device"] = device.str();
  report["p"] = p;
  report["condition"] = condition;
  report["epsilon"] = epsilon;
  report["warmup"] = warmup;
  report["repetitions"] = repetitions;
  report["rows"] = nlohmann::json::array();
  report["ceilings"] = nlohmann::json::array();
  std::map<int64_t, std::pair<double, std::string>> fastest_accurate;  // b → (ms, config)

  for (const auto& shape : shapes) {
    auto spectrum = testing::log_spaced_spectrum(shape.count, shape.b, condition, seed + shape.b);
    auto reference = testing::eigh_inverse_root(spectrum.matrices, epsilon, p);
    auto input = spectrum.matrices.to(options);
    std::map<MatmulPrecision, double> ceilings;
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
      std::string dtype;
      double gflops = bmm_gflops(shape.count, shape.b, matmul_dtype(precision), device, warmup, repetitions, &dtype);
      ceilings[precision] = gflops;
      report["ceilings"].push_back({{"N", shape.count}, {"b", shape.b}, {"precision", to_string(precision)},
          {"matmul_dtype", dtype}, {"gflops", gflops}});
    }
    for (const auto& config : configs) {
      auto solver = InverseRootOptions()
                        .method(config.method)
                        .scaling(config.scaling)
                        .precision(config.precision)
                        .epsilon(epsilon);
      auto timing = time_it([&] { return inverse_root(input, p, solver); }, warmup, repetitions);
      double error = testing::max_relative_error(inverse_root(input, p, solver).cpu(), reference);
      double gflops = inverse_root_flops(shape.count, shape.b, p, solver) / (timing.median_ms * 1e6);
      double fraction = gflops / ceilings[config.precision];
      const bool uses_scaling = config.method != RootMethod::EVD;
      std::printf("%5ld %5ld %-9s %-8s %-4s %10s %9s %8s %8s%%\n", static_cast<long>(shape.count),
          static_cast<long>(shape.b), to_string(config.method).c_str(),
          uses_scaling ? to_string(config.scaling).c_str() : "-", to_string(config.precision).c_str(),
          fixed(timing.median_ms, 2).c_str(), scientific(error).c_str(), fixed(gflops, 1).c_str(),
          fixed(100.0 * fraction, 1).c_str());
      std::fflush(stdout);
      report["rows"].push_back({{"N", shape.count}, {"b", shape.b}, {"method", to_string(config.method)},
          {"scaling", uses_scaling ? to_string(config.scaling) : "none"}, {"precision", to_string(config.precision)},
          {"median_ms", timing.median_ms}, {"min_ms", timing.min_ms}, {"max_ms", timing.max_ms},
          {"relative_error", error}, {"gflops", gflops}, {"ceiling_fraction", fraction}});
      auto& best = fastest_accurate.try_emplace(shape.b, std::numeric_limits<double>::infinity(), "none").first->second;
      if (error <= 1e-3 && timing.median_ms < best.first) {
        best = {timing.median_ms, to_string(config.method) + "/" +
                                      (uses_scaling ? to_string(config.scaling) : std::string("-")) + "/" +
                                      to_string(config.precision)};
      }
    }
    std::printf("  matmul ceiling at N=%ld b=%ld: fp32 %.1f, fp16 %.1f, bf16 %.1f GFLOP/s\n",
        static_cast<long>(shape.count), static_cast<long>(shape.b), ceilings[MatmulPrecision::FP32],
        ceilings[MatmulPrecision::FP16], ceilings[MatmulPrecision::BF16]);
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
