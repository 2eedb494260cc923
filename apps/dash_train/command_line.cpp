#include "command_line.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <sstream>

namespace dash_train {
namespace {

template <typename T>
std::vector<T> parse_list(const std::string& flag, const std::string& text) {
  std::vector<T> values;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto value = nlohmann::json::parse(item, nullptr, /*allow_exceptions=*/false);
    TORCH_CHECK(value.is_number() && (!std::is_integral_v<T> || is_int64(value)), "dash-train: ", flag,
        " expects a comma-separated list of ", std::is_integral_v<T> ? "integers" : "numbers", ", got '", text, "'");
    values.push_back(value.get<T>());
  }
  TORCH_CHECK(!values.empty(), "dash-train: ", flag, " needs at least one value");
  return values;
}

bool is_flag(const std::string& argument) { return argument.rfind("--", 0) == 0; }

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& arguments) {
  CommandLine line;
  size_t i = 0;
  // -h/--help anywhere (even after a bad value), or `help` as the command.
  for (const auto& argument : arguments) {
    if (argument == "-h" || argument == "--help" || (&argument == &arguments.front() && argument == "help")) {
      line.command = "help";
      return line;
    }
  }
  if (i < arguments.size() && !is_flag(arguments[i])) {
    line.command = arguments[i++];
    TORCH_CHECK(line.command == "train" || line.command == "compare" || line.command == "help",
        "dash-train: unknown command '", line.command, "'; expected train or compare (see --help)");
  }
  // (flag name, value) pairs, with "--key=value" split and bare booleans set to true.
  const auto defaults = to_json(TrainConfig{});  // which keys are booleans
  std::vector<std::pair<std::string, std::string>> flags;
  for (; i < arguments.size(); ++i) {
    TORCH_CHECK(is_flag(arguments[i]), "dash-train: expected --KEY, got '", arguments[i], "'");
    auto name = arguments[i].substr(2);
    const auto equals = name.find('=');
    if (equals != std::string::npos) {
      flags.emplace_back(name.substr(0, equals), name.substr(equals + 1));
      continue;
    }
    auto key = name;
    for (auto& c : key) {
      if (c == '-') c = '_';
    }
    const bool boolean = defaults.contains(key) && defaults[key].is_boolean();
    if (boolean && (i + 1 == arguments.size() || is_flag(arguments[i + 1]))) {
      flags.emplace_back(name, "true");
      continue;
    }
    TORCH_CHECK(i + 1 < arguments.size(), "dash-train: --", name, " needs a value");
    flags.emplace_back(name, arguments[++i]);
  }

  bool out_dir_given = false;
  // Config files first, then the command line over them.
  auto apply_flags = [&](TrainConfig& config) {
    for (const auto& [name, value] : flags) {
      if (name == "config") apply_config_file(config, value);
    }
    for (const auto& [name, value] : flags) {
      if (name == "config") continue;
      if (name == "runs") {
        line.runs_file = value;
      } else if (name == "seeds") {
        line.seeds = parse_list<int64_t>("--seeds", value);
      } else if (name == "lrs") {
        line.lrs = parse_list<double>("--lrs", value);
      } else {
        apply_json(config, nlohmann::json{{name, parse_command_line_value(name, value)}}, "command line");
        out_dir_given = out_dir_given || name == "out_dir" || name == "out-dir";
      }
    }
  };
  apply_flags(line.config);
  // A resumed run takes its configuration from the one its folder recorded, so that
  // `--name big --resume` is enough; the options given again go over it (and must
  // agree with the checkpoint where they shape it: load_training_checkpoint()). Not
  // taken: where the last invocation stopped (stop_at) and whether it replaced a run.
  const auto recorded_path = line.config.run_dir() + "/config.json";
  if (line.command == "train" && line.config.resume && std::filesystem::exists(recorded_path)) {
    TrainConfig resumed;
    apply_config_file(resumed, recorded_path);
    resumed.stop_at = 0;
    resumed.overwrite = false;
    apply_flags(resumed);
    line.config = resumed;
  }
  const bool compare_only = !line.runs_file.empty() || line.lrs.size() > 0 || line.seeds != std::vector<int64_t>{1};
  TORCH_CHECK(line.command == "compare" || !compare_only, "dash-train: --runs, --seeds and --lrs belong to 'compare'");
  if (line.command == "compare" && !out_dir_given) line.config.out_dir = "results/compare";
  TORCH_CHECK(line.command != "compare" || line.config.nproc == 1,
      "dash-train: compare runs in one process; --nproc belongs to 'train'");
  if (line.command != "help") line.config.check();
  return line;
}

std::string usage() {
  return "dash-train: train a small Llama on text with AdamW or DASH.\n\n"
         "  dash-train [train] [--config FILE.json] [--KEY VALUE]...\n"
         "  dash-train compare [--runs RUNS.json] [--seeds 1,2,3] [--lrs 1e-3,3e-3] [--KEY VALUE]...\n\n"
         "compare runs each configuration of RUNS.json (an array of {\"name\": ..., KEY: VALUE...}; default:\n"
         "AdamW, DASH-EVD, DASH-NDB-Frobenius, DASH-NDB-power-iteration, DASH-CN) on the same data and seeds,\n"
         "prints a table and writes OUT_DIR/{summary.md,summary.json,validation_loss.png,validation_loss_time.png}.\n\n"
         "Keys (config file: the same names as JSON keys):\n" +
         config_keys_help();
}

}  // namespace dash_train
