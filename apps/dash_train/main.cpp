// dash-train: the training app (README's main command). See command_line.h.

#include "command_line.h"
#include "compare.h"
#include "run_folder.h"
#include "text_corpus.h"
#include "trainer.h"

#include "local_launch.h"

#include <dash/distributed.h>
#include <dash/option_names.h>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

// A collective that waits longer than this fails (a rank died or hangs).
constexpr auto kCollectiveTimeout = std::chrono::minutes(2);

/// This process's ranks: from torchrun-style variables (set by `--nproc` or
/// torchrun), else a single process.
std::shared_ptr<const dash::DistributedContext> distributed_context(
    const dash_train::TrainConfig& config, const dash::RankEnvironment& environment) {
  TORCH_CHECK(config.nproc == 1 || config.nproc == environment.world_size, "dash-train: --nproc ", config.nproc,
      " conflicts with WORLD_SIZE=", environment.world_size, " from the environment");
  TORCH_CHECK(config.device == "cpu", "dash-train: data-parallel runs use Gloo on CPU; device '", config.device,
      "' is not supported with several ranks");
  if (environment.world_size == 1) return nullptr;
  auto group = dash::gloo_process_group_from_environment(environment, kCollectiveTimeout);
  const auto options = dash::DistributedOptions()
                           .communication_dtype(dash::parse_communication_dtype(config.communication_dtype))
                           .scheme(dash::parse_distribution_scheme(config.distribution_scheme))
                           .timeout(kCollectiveTimeout);
  return std::make_shared<dash::DistributedContext>(group, options);
}

int train(const dash_train::TrainConfig& config, const std::vector<std::string>& arguments) {
  const auto environment = dash::rank_environment();
  // Before any work (and before any rank starts): a folder that does not fit
  // --resume / --overwrite. Ranks leave it to rank 0, which also locks the folder.
  if (!environment.has_value()) {
    dash_train::check_run_folder(config.run_dir(), dash_train::folder_use(config));
    const auto ignored = dash_train::changed_dash_keys(config.dash);
    if (config.optimizer == "adamw" && !ignored.empty()) {
      std::string names;
      for (const auto& name : ignored) names += (names.empty() ? "--" : ", --") + name;
      std::cerr << "dash-train: warning: optimizer adamw ignores the DASH keys given (" << names << ")\n";
    }
  }
  if (!environment.has_value() && config.nproc > 1) {
    // The launcher: runs this same command as nproc ranks and waits for them.
    std::vector<std::string> command{std::filesystem::read_symlink("/proc/self/exe").string()};
    command.insert(command.end(), arguments.begin(), arguments.end());
    return dash::launch::launch_local_ranks(command, config.nproc);
  }
  const auto distributed = environment.has_value() ? distributed_context(config, *environment) : nullptr;
  const bool main_process = !distributed || distributed->rank() == 0;
  const auto corpus = dash_train::load_text_corpus(config.data.empty() ? dash_train::kDefaultCorpusPath : config.data,
      config.validation_fraction, config.seq_len + 1);
  if (main_process) {
    std::cerr << "data: " << corpus.train.numel() << " training bytes (" << corpus.train_documents << " documents), "
              << corpus.validation.numel() << " validation bytes (" << corpus.validation_documents << " documents)"
              << (distributed ? ", " + std::to_string(distributed->world_size()) + " ranks" : "") << "\n";
  }
  dash_train::Trainer trainer(config, corpus, distributed);
  const auto result = trainer.run();
  if (!main_process) return 0;
  // A run stopped (--stop-at) before its first validation has no loss to show yet.
  std::ostringstream validation;
  if (result.validation.empty()) {
    validation << "no validation yet (every " << config.eval_every << " steps)";
  } else {
    validation << "validation loss " << result.final_validation_loss << " at step " << result.validation.back().step
               << ", perplexity " << std::exp(result.final_validation_loss) << " per byte";
  }
  std::cout << "steps " << result.steps << (result.finished ? "" : " (stopped early)") << ", " << validation.str()
            << "\nmean ms per step: forward " << result.forward_ms << ", backward " << result.backward_ms
            << ", optimizer " << result.optimizer_ms << "; " << result.tokens_per_second << " tokens/s"
            << (distributed ? "; optimizer communication " + std::to_string(result.optimizer_bytes_per_step) +
                                  " bytes per step per rank"
                            : std::string())
            << "\n"
            << "logs: " << trainer.run_dir() << "/{train.csv,validation.csv,summary.json}\n";
  return 0;
}

int compare(const dash_train::CommandLine& line) {
  dash_train::CompareOptions options;
  options.base = line.config;
  options.seeds = line.seeds;
  options.lrs = line.lrs;
  if (line.runs_file.empty()) {
    options.runs = dash_train::default_comparison_runs();
  } else {
    std::ifstream in(line.runs_file);
    TORCH_CHECK(in, "dash-train: cannot read runs file '", line.runs_file, "'");
    options.runs = dash_train::parse_json_file(in, "runs file '" + line.runs_file + "'");
  }
  const auto rows = dash_train::run_comparison(options);
  std::cout << dash_train::comparison_table(rows) << "written: " << options.base.out_dir
            << "/{summary.md,summary.json,validation_loss.png,validation_loss_time.png}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> arguments(argv + 1, argv + argc);
    const auto line = dash_train::parse_command_line(arguments);
    if (line.command == "help") {
      std::cout << dash_train::usage();
      return 0;
    }
    return line.command == "compare" ? compare(line) : train(line.config, arguments);
  } catch (const c10::Error& error) {
    std::cerr << error.what_without_backtrace() << '\n';
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "dash-train: " << error.what() << '\n';
    return 2;
  }
}
