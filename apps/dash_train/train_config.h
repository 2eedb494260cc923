#pragma once

// Everything a dash-train run is configured by. One flat set of keys, shared by the
// JSON config file ({"lr": 3e-3, "optimizer": "dash", ...}) and the command line
// (--lr 3e-3 --optimizer dash; '-' and '_' are interchangeable): dash-train's own
// (data, model, run, schedule, AdamW) and DASH's, generated from the optimizer's
// option lists (dash_keys.h). Unknown keys and out-of-range values are errors that
// name the key.

#include "dash_keys.h"
#include "json_values.h"
#include "llama.h"

#include <dash/optimizer_options.h>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace dash_train {

struct TrainConfig {
  // Data.
  std::string data;  ///< a text file or a folder of them; "" → kDefaultCorpusPath
  double validation_fraction = 0.05;
  // Model (LlamaConfig; vocabulary 256 bytes).
  int64_t dim = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t ffn_hidden = 0;
  int64_t seq_len = 128;
  // Run.
  std::string name = "run";
  std::string out_dir = "results/train";
  std::string device = "cpu";
  int64_t seed = 1;
  int64_t steps = 300;
  int64_t batch_size = 16;
  int64_t eval_every = 50;
  int64_t eval_batches = 8;
  int64_t log_every = 10;
  int64_t checkpoint_every = 0;  ///< 0: only at the end (and at stop_at)
  int64_t stop_at = 0;           ///< > 0: stop after this step as if interrupted (checkpoint written)
  bool resume = false;
  bool overwrite = false;  ///< replace a run already in out_dir/name (without it that is an error)
  bool progress = true;
  int64_t threads = 0;                             ///< intra-op CPU threads; 0: LibTorch's default
  int64_t nproc = 1;                               ///< > 1: launch this many local data-parallel ranks
  std::string communication_dtype = "fp32";        ///< distributed DASH's update exchange
  std::string distribution_scheme = "replicated";  ///< replicated | zero (dash averages the gradients)
  // Schedule and regularisation.
  double lr = 3e-3;
  int64_t warmup_steps = 30;
  double min_lr_ratio = 0.1;    ///< cosine decays lr to lr · min_lr_ratio
  double clip_grad_norm = 1.0;  ///< 0: off
  double weight_decay = 0.0;
  // Optimizer.
  std::string optimizer = "adamw";  ///< adamw | dash
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  /// With spectral descent (Muon's recipe): the lr of the embedding, the output layer
  /// and the 1-D parameters, which stay on AdamW; 0: lr.
  double adamw_lr = 0.0;
  // DASH (ignored by adamw): every option of the optimizer's lists under its Python
  // keyword (dash_keys.h), from dash_train_defaults().
  dash::DashOptions dash = dash_train_defaults();

  LlamaConfig model() const;
  /// out_dir/name: the run's logs and checkpoints.
  std::string run_dir() const { return out_dir + "/" + name; }
  /// Throws naming the first key out of range (or an unknown name).
  void check() const;
};

/// All keys with their current values.
nlohmann::json to_json(const TrainConfig& config);
/// Sets the keys present in `values` (an object); unknown keys and wrongly typed
/// values are errors. `source` names where they came from, for the message.
void apply_json(TrainConfig& config, const nlohmann::json& values, const std::string& source);
/// Reads a JSON object from a file and applies it.
void apply_config_file(TrainConfig& config, const std::string& path);

/// The JSON document in `in`; `what` (e.g. "config file 'a.json'") names it in the
/// errors: not JSON, or a key given twice in one object.
nlohmann::json parse_json_file(std::istream& in, const std::string& what);
/// The keys whose change makes a checkpoint unusable (model, data, optimizer).
std::vector<std::string> checkpoint_compatibility_keys();
/// The help text: every key, its default and meaning.
std::string config_keys_help();

/// Command-line value: JSON if it parses as a number, bool or null, else a string;
/// a number beyond double's range is an error naming --`name`.
nlohmann::json parse_command_line_value(const std::string& name, const std::string& text);

}  // namespace dash_train
