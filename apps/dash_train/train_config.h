#pragma once

// Everything a dash-train run is configured by. One flat set of keys, shared by the
// JSON config file ({"lr": 3e-3, "optimizer": "dash", ...}) and the command line
// (--lr 3e-3 --optimizer dash; '-' and '_' are interchangeable). Unknown keys and
// out-of-range values are errors that name the key.

#include "llama.h"

#include <dash/optimizer_options.h>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
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
  // DASH (ignored by adamw).
  int64_t block_size = 128;
  std::string root_method = "ndb";
  std::string scaling = "multi-pi";
  std::string precision = "fp32";
  std::string grafting = "adam";
  std::string execution = "batched";
  int64_t root_frequency = 10;
  int64_t start_step = 10;
  int64_t newton_steps = 10;
  int64_t power_iterations = 10;
  int64_t chebyshev_degree = 40;
  double root_epsilon = 1e-10;
  double root_relative_epsilon = 0.0;
  double eigen_refresh_tolerance = 0.0;  ///< evd: warm-started eigenbases (0: eigh every time)
  int64_t eigen_warm_iterations = 1;
  std::string ndb_polynomial = "newton-schulz";
  double minimax_interval_min = 1e-6;
  std::string ndb_evaluation =
      "auto";  ///< ndb: matmuls (the iteration), eigh (its function of the eigenvalues) or auto
  std::string preconditioning_precision = "fp32";  ///< L̄ Ĝ R̄ in fp32 or bf16
  double auto_max_error = 0.5;                     ///< root_method auto
  double beta_factor = 0.95;
  double workspace_limit = dash::DashOptions().workspace_limit();  ///< fraction of the state, bytes, or 0: none
  std::string factor_precision = "fp32";                           ///< storage of L, R: fp32 or bf16
  std::string root_precision = "fp32";                             ///< storage of L̄, R̄
  std::string moment_precision = "fp32";                           ///< storage of the blocks' M, A (and B_m)

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
/// The keys whose change makes a checkpoint unusable (model, data, optimizer).
std::vector<std::string> checkpoint_compatibility_keys();
/// The help text: every key, its default and meaning.
std::string config_keys_help();

/// Whether a JSON value is an integer that int64_t holds (3 and 3.0 are; 3.5,
/// 1e30 and 2^64 − 1 are not).
bool is_int64(const nlohmann::json& value);

/// Command-line value: JSON if it parses as a number, bool or null, else a string;
/// a number beyond double's range is an error naming --`name`.
nlohmann::json parse_command_line_value(const std::string& name, const std::string& text);

}  // namespace dash_train
