// The benchmarks run end to end on tiny inputs and write JSON with the promised
// fields, so that they never rot. No timing is asserted.

#include "solver_bench.h"
#include "step_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <string>

namespace dash::bench {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return nlohmann::json::parse(file);
}

TEST(BenchSmoke, StepBenchWritesEveryConfiguration) {
  const auto path = ::testing::TempDir() + "dash_step_bench.json";
  ASSERT_EQ(run_step_bench({"--preset", "smoke", "--block", "8", "--frequencies", "1,10", "--methods", "evd,ndb",
                "--scalings", "fro,multi-pi", "--precisions", "fp32,bf16", "--profile", "1", "--json", path}),
      0);
  auto report = read_json(path);
  std::set<std::string> labels;
  for (const auto& row : report["rows"]) {
    labels.insert(row["configuration"].get<std::string>());
    EXPECT_GT(row["mean_ms"].get<double>(), 0.0);
    EXPECT_GT(row["state_bytes"].get<int64_t>(), 0);
  }
  // adamw, sequential, evd × 2 precisions, ndb × 2 scalings × 2 precisions.
  EXPECT_EQ(labels.size(), 8u);
  EXPECT_EQ(report["rows"].size(), 16u);  // both frequencies
  EXPECT_TRUE(labels.count("sequential evd fp32"));
  EXPECT_TRUE(labels.count("batched ndb multi-pi bf16"));
  for (const auto& row : report["rows"]) {
    if (row["configuration"] == "adamw") continue;
    EXPECT_GT(row["flops_per_step"].get<double>(), 0.0);
    EXPECT_FALSE(row["phases_ms"].empty());
  }
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

TEST(BenchSmoke, BadArgumentsAreRejected) {
  EXPECT_THROW(run_step_bench({"--preset", "gpt-5"}), std::invalid_argument);
  EXPECT_THROW(run_step_bench({"--blocks", "8"}), std::invalid_argument);
  EXPECT_THROW(run_step_bench({"--shapes", "8xq"}), std::invalid_argument);
}

}  // namespace
}  // namespace dash::bench
