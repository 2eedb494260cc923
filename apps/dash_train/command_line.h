#pragma once

// dash-train's command line:
//   dash-train [train] [--config FILE] [--KEY VALUE | --KEY=VALUE]...
//   dash-train compare [--runs FILE] [--seeds 1,2,3] [--lrs 1e-3,3e-3] [--config FILE] [--KEY VALUE]...
//   dash-train --help
// Keys are those of TrainConfig (config_keys_help()); --config is applied first,
// then the keys in order. A boolean key given without a value means true.

#include "train_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dash_train {

struct CommandLine {
  std::string command = "train";  ///< train | compare | help
  TrainConfig config;
  std::string runs_file;          ///< compare: JSON runs; "" → default_comparison_runs()
  std::vector<int64_t> seeds{1};  ///< compare
  std::vector<double> lrs;        ///< compare: lr grid
};

CommandLine parse_command_line(const std::vector<std::string>& arguments);

std::string usage();

}  // namespace dash_train
