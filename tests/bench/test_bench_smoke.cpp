// The benchmarks run end to end on tiny inputs and write JSON with the promised
// fields, so that they never rot. No timing is asserted.

#include "accuracy_bench.h"
#include "solver_bench.h"
#include "arguments.h"
#include "step_bench.h"
#include "support/solver_options.h"

#include "kernels/stack_blas.h"
#include "linalg/newton_schulz.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dash::bench {
namespace {

// The message of what `run` throws ("no error" if nothing).
std::string message(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "no error";
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return nlohmann::json::parse(file);
}

// The non-root matmul FLOPs of the smoke model at B = 8, counted here from the
// parameter shapes (independently of the optimizer's stacks): 2·r·c·(r + c) per
// block for L̄ Ĝ R̄; the same for the factor updates as GEMMs, or r·(r + 1)·c +
// c·(c + 1)·r where syrk forms one triangle of G Gᵀ and Gᵀ G.
// The smoke model's matrices (model_shapes.cpp's "smoke" preset, written out here).
std::vector<std::pair<int64_t, int64_t>> smoke_matrices() {
  return {{40, 16}, {16, 16}, {16, 16}, {16, 16}, {16, 16}, {24, 16}, {24, 16}, {16, 24}, {40, 16}};
}

double smoke_flops(bool syrk) {
  double flops = 0.0;
  for (const auto& [rows, cols] : smoke_matrices()) {
    for (int64_t row = 0; row < rows; row += 8) {
      for (int64_t col = 0; col < cols; col += 8) {
        const double r = static_cast<double>(std::min<int64_t>(8, rows - row));
        const double c = static_cast<double>(std::min<int64_t>(8, cols - col));
        flops += syrk ? r * (r + 1.0) * c + c * (c + 1.0) * r : 2.0 * r * c * (r + c);
      }
    }
  }
  return flops;
}

// dash-bench step on the smoke model, batched EVD at B = 8 and f = 2 plus `extra`
// arguments: its report's rows by configuration (AdamW's included).
std::map<std::string, nlohmann::json> evd_smoke_rows(const std::string& name, std::vector<std::string> extra) {
  const auto path = ::testing::TempDir() + "dash_step_bench_" + name + ".json";
  std::vector<std::string> arguments = {"--preset", "smoke", "--preconditioners", "shampoo", "--block", "8",
      "--frequencies", "2", "--methods", "evd", "--precisions", "fp32", "--executions", "batched", "--baseline", "0",
      "--steps", "2", "--json", path};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  EXPECT_EQ(run_step_bench(arguments), 0);
  std::map<std::string, nlohmann::json> rows;
  const auto report = read_json(path);
  for (const auto& row : report["rows"]) rows[row["configuration"].get<std::string>()] = row;
  return rows;
}

TEST(BenchSmoke, StepBenchWritesEveryConfiguration) {
  const auto path = ::testing::TempDir() + "dash_step_bench.json";
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--preconditioners", "shampoo", "--block", "8", "--frequencies",
                "1,10", "--methods", "evd,ndb", "--scalings", "fro,multi-pi", "--precisions", "fp32,bf16",
                "--executions", "batched,auto", "--profile", "1", "--json", path}),
      0);
  auto report = read_json(path);
  std::set<std::string> labels;
  for (const auto& row : report["rows"]) labels.insert(row["configuration"].get<std::string>());
  // adamw, sequential, evd × 2 precisions × 2 executions, ndb × 2 scalings × 2 precisions × 2 executions.
  EXPECT_EQ(labels.size(), 14u);
  EXPECT_EQ(report["rows"].size(), 28u);  // both frequencies
  EXPECT_TRUE(labels.count("sequential evd fp32"));
  EXPECT_TRUE(labels.count("batched ndb multi-pi bf16"));
  EXPECT_TRUE(labels.count("auto evd - fp32"));
  // The factor updates' FLOPs follow the path the header names.
  const auto factor_updates = report["factor_updates"].get<std::string>();
  EXPECT_TRUE(factor_updates.rfind("syrk", 0) == 0 || factor_updates.rfind("one GEMM per stack (", 0) == 0)
      << factor_updates;
  const double factor_flops = smoke_flops(factor_updates.rfind("syrk", 0) == 0);
  const double preconditioning_flops = smoke_flops(/*syrk=*/false);
  for (const auto& row : report["rows"]) {
    const auto label = row["configuration"].get<std::string>();
    EXPECT_GT(row["state_bytes"].get<int64_t>(), 0) << label;
    if (label == "adamw") continue;
    EXPECT_NEAR(row["factor_flops"].get<double>(), factor_flops, 0.5) << label;
    EXPECT_NEAR(row["preconditioning_flops"].get<double>(), preconditioning_flops, 0.5) << label;
    // Amortised FLOPs add the roots to the non-root matmuls.
    EXPECT_GT(row["flops_per_step"].get<double>(), factor_flops + preconditioning_flops) << label;
    EXPECT_GT(row["ceiling_gflops"].get<double>(), 0.0) << label;
    // The floor: the non-root matmuls, which are float32 whatever the roots' precision.
    EXPECT_NEAR(row["floor_ms"].get<double>(),
        (factor_flops + preconditioning_flops) / (row["fp32_ceiling_gflops"].get<double>() * 1e6), 1e-9)
        << label;
    if (label.find("fp32") != std::string::npos) {
      EXPECT_EQ(row["fp32_ceiling_gflops"].get<double>(), row["ceiling_gflops"].get<double>()) << label;
    }
    const auto frequency = row["frequency"].get<int64_t>();
    // f = 1: every step computes roots; f = 10: one timed step in ten does.
    EXPECT_EQ(row["non_root_median_ms"].get<double>() > 0.0, frequency == 10) << label;
    EXPECT_GT(row["root_step_ms"].get<double>(), 0.0) << label;
    EXPECT_EQ(row["root_choices"].get<std::string>().empty(), label.rfind("auto", 0) != 0) << label;
    std::set<std::string> phases;
    for (const auto& [phase, ms] : row["phases_ms"].items()) phases.insert(phase);
    EXPECT_EQ(
        phases, (std::set<std::string>{"communication", "copies", "factors", "grafting", "preconditioning", "roots"}))
        << label;
    EXPECT_GT(row["phases_ms"]["roots"].get<double>(), 0.0) << label;
  }
}

// Spectral descent's rows: one per execution (no root sweeps), its FLOPs those of
// Newton–Schulz on every block, no time in factors or roots.
TEST(BenchSmoke, StepBenchSpectralDescentRowsCountNewtonSchulz) {
  const auto path = ::testing::TempDir() + "dash_step_bench_spectral.json";
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--preconditioners", "spectral_descent", "--block", "8",
                "--frequencies", "2", "--executions", "batched,sequential", "--baseline", "0", "--steps", "2",
                "--profile", "1", "--json", path}),
      0);
  const auto report = read_json(path);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : report["rows"]) rows[row["configuration"].get<std::string>()] = row;
  ASSERT_EQ(rows.size(), 3u) << "adamw, batched and sequential spectral descent";
  const bool syrk = kernels::stack_syrk_plan(at::kCPU).one_triangle;
  for (const auto* label : {"batched spectral_descent", "sequential spectral_descent"}) {
    ASSERT_TRUE(rows.count(label)) << label;
    const auto& row = rows[label];
    double flops = 0.0;  // the smoke model's matrices at B = 8, as smoke_flops() tiles them
    for (const auto& [height, width] : smoke_matrices()) {
      for (int64_t top = 0; top < height; top += 8) {
        for (int64_t left = 0; left < width; left += 8) {
          flops += linalg::newton_schulz_flops(
              std::min<int64_t>(8, height - top), std::min<int64_t>(8, width - left), 5, syrk);
        }
      }
    }
    EXPECT_NEAR(row["preconditioning_flops"].get<double>(), flops, 0.5) << label;
    EXPECT_EQ(row["factor_flops"].get<double>(), 0.0) << label;
    EXPECT_EQ(row["phases_ms"]["roots"].get<double>(), 0.0) << label;
    EXPECT_EQ(row["phases_ms"]["factors"].get<double>(), 0.0) << label;
    EXPECT_GT(row["phases_ms"]["preconditioning"].get<double>(), 0.0) << label;
  }
}

// RootMethod::Auto reports its choice with every method's trial; warm-started EVD
// counts how its roots were computed.
TEST(BenchSmoke, StepBenchReportsRootMethodChoicesAndEigenbasisCounts) {
  using ::testing::HasSubstr;
  const auto path = ::testing::TempDir() + "dash_step_bench_auto.json";
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--preconditioners", "shampoo", "--block", "8", "--frequencies", "1",
                "--methods", "evd,auto", "--scalings", "multi-pi", "--precisions", "fp32", "--executions", "batched",
                "--baseline", "0", "--eigen-tolerances", "0,0.5", "--steps", "3", "--json", path}),
      0);
  const auto report = read_json(path);
  std::map<std::string, std::string> choices;
  for (const auto& row : report["rows"]) {
    choices[row["configuration"].get<std::string>()] = row["root_choices"].get<std::string>();
  }
  ASSERT_EQ(choices.size(), 4u);  // adamw, evd τ = 0, evd τ = 0.5, auto
  EXPECT_EQ(choices.at("batched evd - fp32"), "");
  EXPECT_THAT(choices.at("batched evd warm τ=0.5 - fp32"), HasSubstr("eigenbases kept "));
  const auto automatic = choices.at("batched auto multi-pi fp32");
  for (const char* method : {"evd ", "cn ", "ndb ", "chebyshev "}) EXPECT_THAT(automatic, HasSubstr(method));
  EXPECT_THAT(automatic, HasSubstr(" ms error "));
}

// --newton-steps runs CN and NDB once per step count (fewer steps, fewer root
// FLOPs); x seq compares each configuration with the same one run per block when
// that was measured, else with the per-block EVD baseline, and names it.
TEST(BenchSmoke, StepBenchNewtonStepCountsAndPerBlockReferences) {
  const auto path = ::testing::TempDir() + "dash_step_bench_newton_steps.json";
  std::vector<std::string> newton_methods;
  for (auto method : dash::testing::newton_solvers()) newton_methods.push_back(to_string(method));
  const auto method_list = comma_joined(newton_methods);
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--preconditioners", "shampoo", "--block", "8", "--frequencies", "1",
                "--methods", method_list, "--scalings", "multi-pi", "--precisions", "fp32", "--executions",
                "batched,sequential", "--newton-steps", "10,4", "--steps", "2", "--tf32", "1", "--json", path}),
      0);
  const auto report = read_json(path);
  EXPECT_EQ(report["float32_matmuls"].get<std::string>().rfind("TF32", 0), 0u);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : report["rows"]) rows[row["configuration"].get<std::string>()] = row;
  // adamw, the per-block EVD baseline, each method × 2 step counts × 2 executions.
  ASSERT_EQ(rows.size(), 2 + 4 * newton_methods.size());
  auto root_flops = [&](const std::string& label) {
    const auto& row = rows.at(label);
    return row["flops_per_step"].get<double>() - row["factor_flops"].get<double>() -
           row["preconditioning_flops"].get<double>();
  };
  for (const auto& method : newton_methods) {
    EXPECT_LT(root_flops("batched " + method + " 4 steps multi-pi fp32"),
        0.6 * root_flops("batched " + method + " multi-pi fp32"))
        << method;
    for (const std::string steps : {"", " 4 steps"}) {
      const auto batched = "batched " + method + steps + " multi-pi fp32";
      const auto per_block = "sequential " + method + steps + " multi-pi fp32";
      EXPECT_EQ(rows.at(batched)["sequential_reference"], per_block);
      EXPECT_EQ(rows.at(per_block)["sequential_reference"], per_block);
      EXPECT_DOUBLE_EQ(rows.at(batched)["speedup_vs_sequential"].get<double>(),
          rows.at(per_block)["mean_ms"].get<double>() / rows.at(batched)["mean_ms"].get<double>());
    }
  }
  EXPECT_EQ(rows.at("sequential evd fp32")["sequential_reference"], "sequential evd fp32");
  EXPECT_EQ(rows.at("adamw")["sequential_reference"], "");
}

// --ndb-evaluations runs NDB once per evaluation; by eigh its root FLOPs are EVD's
// (an eigh and Q·φ·Qᵀ per factor), far below the matmul iteration's.
TEST(BenchSmoke, StepBenchNewtonDBEvaluations) {
  const auto path = ::testing::TempDir() + "dash_step_bench_ndb_evaluations.json";
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--preconditioners", "shampoo", "--block", "8", "--frequencies", "1",
                "--methods", "evd,ndb", "--ndb-evaluations", "matmuls,eigh", "--scalings", "multi-pi", "--precisions",
                "fp32", "--executions", "batched", "--baseline", "0", "--steps", "2", "--json", path}),
      0);
  const auto report = read_json(path);
  std::map<std::string, double> root_flops;
  for (const auto& row : report["rows"]) {
    const auto label = row["configuration"].get<std::string>();
    if (label != "adamw") {
      root_flops[label] = row["flops_per_step"].get<double>() - row["factor_flops"].get<double>() -
                          row["preconditioning_flops"].get<double>();
    }
  }
  ASSERT_EQ(root_flops.size(), 3u);
  EXPECT_DOUBLE_EQ(root_flops.at("batched ndb by eigh multi-pi fp32"), root_flops.at("batched evd - fp32"));
  EXPECT_LT(root_flops.at("batched ndb by eigh multi-pi fp32"), 0.3 * root_flops.at("batched ndb multi-pi fp32"));
}

// --preconditioning-precisions runs each configuration once per precision of
// L̄ Ĝ R̄; a bfloat16 row's floor counts those FLOPs at the bfloat16 ceiling.
TEST(BenchSmoke, StepBenchPreconditioningPrecisions) {
  const auto rows = evd_smoke_rows("preconditioning", {"--preconditioning-precisions", "fp32,bf16"});
  ASSERT_EQ(rows.size(), 3u);
  const auto& float32 = rows.at("batched evd - fp32");
  const auto& bfloat16 = rows.at("batched evd - fp32 pc bf16");
  EXPECT_DOUBLE_EQ(
      float32["preconditioning_ceiling_gflops"].get<double>(), float32["fp32_ceiling_gflops"].get<double>());
  const double bf16_ceiling = bfloat16["preconditioning_ceiling_gflops"].get<double>();
  ASSERT_GT(bf16_ceiling, 0.0);
  EXPECT_NEAR(bfloat16["floor_ms"].get<double>(),
      bfloat16["factor_flops"].get<double>() / (bfloat16["fp32_ceiling_gflops"].get<double>() * 1e6) +
          bfloat16["preconditioning_flops"].get<double>() / (bf16_ceiling * 1e6),
      1e-9);
}

// --state-precisions: once per storage precision of the roots and moments; bf16
// holds less state (the factors stay fp32).
TEST(BenchSmoke, StepBenchStatePrecisions) {
  const auto rows = evd_smoke_rows("state", {"--state-precisions", "fp32,bf16"});
  ASSERT_EQ(rows.size(), 3u);
  const auto float32 = rows.at("batched evd - fp32")["state_bytes"].get<int64_t>();
  const auto bfloat16 = rows.at("batched evd - fp32 roots+moments bf16")["state_bytes"].get<int64_t>();
  EXPECT_LT(bfloat16, float32);
  EXPECT_GT(bfloat16, float32 / 2) << "the factors stay float32";
}

TEST(BenchSmoke, SolverBenchWritesRowsWithErrors) {
  const auto path = ::testing::TempDir() + "dash_solver_bench.json";
  ASSERT_EQ(run_solver_bench({"--preset", "tiny", "--methods", "evd,cn", "--reps", "1", "--json", path}), 0);
  auto report = read_json(path);
  // 2 shapes × (evd × 3 precisions + cn × 3 scalings × 3 precisions).
  EXPECT_EQ(report["rows"].size(), 2u * (3 + 9));
  for (const auto& row : report["rows"]) {
    EXPECT_LT(row["relative_error"].get<double>(), 0.5);
    EXPECT_GT(row["ceiling_fraction"].get<double>(), 0.0);
  }
}

// Warm-start mode: every method solves the EMA-updated factors from scratch, and
// warm-started EVD starts from the eigenbasis before the update. A tolerance no
// basis can meet recomputes every matrix and matches plain EVD's error; the
// largest keeps some bases and is less accurate for it.
TEST(BenchSmoke, SolverBenchWarmStartCountsHowEachRootWasComputed) {
  const auto path = ::testing::TempDir() + "dash_solver_bench_warm.json";
  ASSERT_EQ(run_solver_bench({"--preset", "tiny", "--methods", "evd", "--reps", "1", "--warm-start", "1",
                "--eigen-tolerances", "1e-12,1", "--json", path}),
      0);
  const auto report = read_json(path);
  EXPECT_EQ(report["warm_start"]["ema_steps"].get<int64_t>(), 10);
  std::map<int64_t, std::vector<nlohmann::json>> rows_by_size;
  for (const auto& row : report["rows"]) rows_by_size[row["N"].get<int64_t>()].push_back(row);
  ASSERT_EQ(rows_by_size.size(), 2u);
  for (const auto& [count, rows] : rows_by_size) {
    ASSERT_EQ(rows.size(), 5u);  // evd × 3 precisions, evd-warm × 2 tolerances
    const auto& cold = rows[0];
    const auto& never_kept = rows[3];
    const auto& kept = rows[4];
    EXPECT_EQ(cold["method"], "evd");
    EXPECT_EQ(never_kept["method"], "evd-warm");
    for (const auto& row : {never_kept, kept}) {
      EXPECT_EQ(
          row["kept"].get<int64_t>() + row["warm_started"].get<int64_t>() + row["recomputed"].get<int64_t>(), count);
      EXPECT_TRUE(row["gflops"].is_null());
    }
    EXPECT_EQ(never_kept["recomputed"].get<int64_t>(), count);
    EXPECT_NEAR(never_kept["relative_error"].get<double>(), cold["relative_error"].get<double>(), 1e-4);
    EXPECT_GT(kept["kept"].get<int64_t>(), 0);
    EXPECT_GT(kept["relative_error"].get<double>(), 10.0 * cold["relative_error"].get<double>());
  }
}

TEST(BenchSmoke, AccuracyBenchFindsTheFewestMatmulsPerErrorLevel) {
  const auto path = ::testing::TempDir() + "dash_accuracy_bench.json";
  ASSERT_EQ(run_accuracy_bench({"--b", "16", "--count", "2", "--conds", "1e2", "--methods", "ndb,ndb-minimax5",
                "--scalings", "fro", "--precisions", "fp32", "--max-steps", "14", "--reps", "1", "--json", path}),
      0);
  auto report = read_json(path);
  ASSERT_EQ(report["rows"].size(), 2u);
  const auto& newton_schulz = report["rows"][0];
  const auto& minimax = report["rows"][1];
  EXPECT_EQ(newton_schulz["method"], "ndb");
  for (const auto& row : report["rows"]) {
    ASSERT_FALSE(row["to_1e-3"].is_null()) << row["method"];
    EXPECT_LE(row["to_1e-3"]["error"].get<double>(), 1e-3);
    EXPECT_LE(row["to_1e-2"]["matmuls"].get<double>(), row["to_1e-3"]["matmuls"].get<double>());
    EXPECT_GT(row["to_1e-3"]["median_ms"].get<double>(), 0.0);
  }
  // p = 4 with k Newton–Schulz steps a pass: two passes of 3k − 3 matmuls.
  const auto steps = newton_schulz["to_1e-3"]["effort"].get<int64_t>();
  EXPECT_EQ(newton_schulz["to_1e-3"]["matmuls"].get<double>(), 6.0 * static_cast<double>(steps) - 6.0);
  EXPECT_LT(minimax["to_1e-3"]["matmuls"].get<double>(), newton_schulz["to_1e-3"]["matmuls"].get<double>());
  EXPECT_THROW(run_accuracy_bench({"--methods", "evd"}), std::invalid_argument);
}

TEST(BenchSmoke, BadArgumentsAreRejected) {
  EXPECT_THROW(run_step_bench({"--preset", "gpt-5"}), std::invalid_argument);
  EXPECT_THROW(run_step_bench({"--blocks", "8"}), std::invalid_argument);
  EXPECT_THROW(run_step_bench({"--shapes", "8xq"}), std::invalid_argument);
  EXPECT_THROW(run_step_bench({"--shapes", "16x16,,16"}), std::invalid_argument);  // not a 0-D shape
}

// Issue 55's dash-bench items: each refused, naming the option, before anything runs.
TEST(BenchSmoke, ConflictingEmptyAndNonNumericValuesAreRefusedByName) {
  using ::testing::HasSubstr;
  EXPECT_THAT(message([] {
    run_step_bench({"--preset", "smoke", "--shapes", "8x8"});
  }),
      HasSubstr("give --shapes or --preset"));
  EXPECT_THAT(message([] {
    run_step_bench({"--frequencies", "1,,2"});
  }),
      HasSubstr("--frequencies has an empty item in '1,,2'"));
  EXPECT_THAT(message([] { run_step_bench({"--frequencies", "1,"}); }), HasSubstr("--frequencies has an empty item"));
  EXPECT_THAT(message([] { run_step_bench({"--methods", ""}); }), HasSubstr("--methods needs at least one value"));
  EXPECT_THAT(message([] { run_solver_bench({"--cond", "nan"}); }), HasSubstr("--cond must be in [1"));
  EXPECT_THAT(message([] {
    run_step_bench({"--shapes", "100000000x100000000", "--methods", "evd"});
  }),
      HasSubstr("alone need"));
}

// Every value is checked when the command line is read, so these fail at once,
// before the first configuration is measured (the preset is the full llama-tiny:
// a late failure would take minutes, and the test would time out).
TEST(BenchSmoke, BadValuesFailBeforeAnythingIsMeasured) {
  using ::testing::HasSubstr;
  EXPECT_THAT(message([] { run_step_bench({"--block", "0"}); }), HasSubstr("--block must be in [1"));
  EXPECT_THAT(message([] { run_step_bench({"--frequencies", "1,0"}); }), HasSubstr("--frequencies must be in [1"));
  EXPECT_THAT(message([] { run_step_bench({"--frequencies", "1,x"}); }), HasSubstr("--frequencies expects integers"));
  EXPECT_THAT(message([] { run_step_bench({"--steps", "99999999999999999999"}); }), HasSubstr("--steps expects"));
  EXPECT_THAT(message([] {
    run_step_bench({"--json", "/nonexistent-folder/report.json"});
  }),
      HasSubstr("--json '/nonexistent-folder/report.json' cannot be written"));
  EXPECT_THAT(message([] { run_step_bench({"--eigen-tolerances", "0,2"}); }), HasSubstr("--eigen-tolerances"));
  EXPECT_THAT(message([] { run_step_bench({"--methods", "evd,svd"}); }), HasSubstr("'svd'"));
  EXPECT_THAT(message([] {
    run_step_bench({"--ndb-polynomials", "chebyshev"});
  }),
      HasSubstr("unknown NewtonDB polynomial 'chebyshev'"));
  EXPECT_THAT(message([] {
    run_step_bench({"--ndb-evaluations", "svd"});
  }),
      HasSubstr("unknown NewtonDB evaluation 'svd'"));
  EXPECT_THAT(message([] {
    run_step_bench({"--preconditioning-precisions", "fp16"});
  }),
      HasSubstr("preconditioning_precision fp16 is not supported"));
  EXPECT_THAT(message([] {
    run_accuracy_bench({"--minimax-interval-min", "0"});
  }),
      HasSubstr("--minimax-interval-min must be in"));
  EXPECT_THAT(message([] { run_solver_bench({"--reps", "0"}); }), HasSubstr("--reps must be in [1"));
  EXPECT_THAT(message([] { run_solver_bench({"--p", "1000000000"}); }), HasSubstr("--p must be in [1, 64]"));
  EXPECT_TRUE(asks_for_help({"--block", "8", "-h"}));
  EXPECT_FALSE(asks_for_help({"--block", "8"}));
}

}  // namespace
}  // namespace dash::bench
