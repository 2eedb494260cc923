#pragma once

// dash-train compare: several optimizer configurations on the same data and seeds,
// a table of validation perplexity and optimizer-step time, and a plot.

#include "train_config.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dash_train {

/// The default comparison: AdamW, DASH-EVD, DASH-NDB (Frobenius scaling), DASH-NDB
/// (multi-vector power-iteration scaling), DASH-CN, each at its tuned lr.
nlohmann::json default_comparison_runs();

struct CompareOptions {
  TrainConfig base;     ///< defaults + --config + command-line keys
  nlohmann::json runs;  ///< array of {"name": ..., key: value...}
  std::vector<int64_t> seeds{1};
  std::vector<double> lrs;  ///< non-empty: every run at every lr (a tuning grid)
  std::string plot_gnuplot = "gnuplot";
};

struct CompareRow {
  std::string name;
  double lr = 0.0;
  int64_t seeds = 0;
  double loss_mean = 0.0, loss_std = 0.0;
  double perplexity_mean = 0.0, perplexity_std = 0.0;
  double optimizer_ms = 0.0;
  double step_ms = 0.0;
  double tokens_per_second = 0.0;
};

/// Runs everything, writes out_dir/{summary.md, summary.json, curves.dat,
/// validation_loss.gp, validation_loss.png} and returns the table rows.
std::vector<CompareRow> run_comparison(const CompareOptions& options);

/// The rows as a Markdown table.
std::string comparison_table(const std::vector<CompareRow>& rows);

}  // namespace dash_train
