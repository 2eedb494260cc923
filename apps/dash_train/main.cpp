// dash-train: the training app (README's main command). See command_line.h.

#include "command_line.h"
#include "compare.h"
#include "text_corpus.h"
#include "trainer.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iostream>

namespace {

int train(const dash_train::TrainConfig& config) {
  const auto corpus = dash_train::load_text_corpus(config.data.empty() ? dash_train::kDefaultCorpusPath : config.data,
                                                   config.validation_fraction, config.seq_len + 1);
  std::cerr << "data: " << corpus.train.numel() << " training bytes (" << corpus.train_documents << " documents), "
            << corpus.validation.numel() << " validation bytes (" << corpus.validation_documents << " documents)\n";
  dash_train::Trainer trainer(config, corpus);
  const auto result = trainer.run();
  std::cout << "steps " << result.steps << (result.finished ? "" : " (stopped early)") << ", validation loss "
            << result.final_validation_loss << ", perplexity " << std::exp(result.final_validation_loss)
            << " per byte\nmean ms per step: forward " << result.forward_ms << ", backward " << result.backward_ms
            << ", optimizer " << result.optimizer_ms << "; " << result.tokens_per_second << " tokens/s\n"
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
    options.runs = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    TORCH_CHECK(!options.runs.is_discarded(), "dash-train: runs file '", line.runs_file, "' is not valid JSON");
  }
  const auto rows = dash_train::run_comparison(options);
  std::cout << dash_train::comparison_table(rows) << "written: " << options.base.out_dir
            << "/{summary.md,summary.json,validation_loss.png}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto line = dash_train::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    if (line.command == "help") {
      std::cout << dash_train::usage();
      return 0;
    }
    return line.command == "compare" ? compare(line) : train(line.config);
  } catch (const c10::Error& error) {
    std::cerr << error.what_without_backtrace() << '\n';
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "dash-train: " << error.what() << '\n';
    return 2;
  }
}
