#pragma once

// Helpers for the dash-train tests: a synthetic text corpus in a temporary folder
// and a tiny configuration that trains in seconds.

#include "support/temporary_folder.h"
#include "train_config.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace dash_train::testing {

using dash::testing::TemporaryFolder;

/// English-like sentences from a small grammar: enough structure to learn quickly.
inline std::string synthetic_text(size_t sentences, unsigned seed) {
  const std::vector<std::string> subjects = {"the optimizer", "a matrix", "the model", "every block", "the solver"};
  const std::vector<std::string> verbs = {"computes", "stacks", "updates", "scales", "preconditions"};
  const std::vector<std::string> objects = {"the gradient", "a root", "the factors", "each step", "the weights"};
  std::mt19937 generator(seed);
  auto pick = [&](const std::vector<std::string>& words) { return words[generator() % words.size()]; };
  std::string text;
  for (size_t i = 0; i < sentences; ++i) text += pick(subjects) + " " + pick(verbs) + " " + pick(objects) + ".\n";
  return text;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

/// A model and run small enough for a unit test (2 layers of width 32).
inline TrainConfig tiny_config(const std::string& data, const std::string& out_dir) {
  TrainConfig config;
  config.data = data;
  config.out_dir = out_dir;
  config.dim = 32;
  config.layers = 2;
  config.heads = 2;
  config.seq_len = 32;
  config.batch_size = 8;
  config.steps = 20;
  config.warmup_steps = 2;
  config.eval_every = 10;
  config.eval_batches = 2;
  config.log_every = 1;
  config.dash.block_size(32).start_step(2).root_frequency(2);
  config.progress = false;
  return config;
}

}  // namespace dash_train::testing
