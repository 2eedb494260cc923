#pragma once

// A dash-train checkpoint: model, optimizer state, step, validation history, and
// the config keys that must match for a resume to continue the same run.

#include "train_config.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dash_train {

struct ValidationPoint {
  int64_t step = 0;
  int64_t tokens = 0;          ///< training tokens seen, all ranks
  double loss = 0.0;           ///< mean cross-entropy, nats per byte
  double train_seconds = 0.0;  ///< wall-clock time of the training steps so far (not validation, not checkpoints)
};

struct CheckpointProgress {
  int64_t step = 0;            ///< steps completed
  double train_seconds = 0.0;  ///< wall-clock time of those steps
  std::vector<ValidationPoint> validation;
  int64_t world_size = 1;  ///< ranks of the run (each saved its own optimizer shard)
};

/// Writes to `path` through a temporary file, fsync and a rename (file_io.h), so a
/// crash or a full disk leaves the previous checkpoint intact; the file carries a
/// checksum of its contents.
void save_training_checkpoint(const std::string& path, const TrainConfig& config, const CheckpointProgress& progress,
    torch::nn::Module& model, torch::optim::Optimizer& optimizer);

/// Restores model and optimizer. Fails on a checksum mismatch (a corrupt file),
/// naming the first key of checkpoint_compatibility_keys() whose value differs
/// from `config`, or naming the ranks when the checkpoint was written by a run on
/// another number of ranks than `world_size`.
CheckpointProgress load_training_checkpoint(const std::string& path, const TrainConfig& config,
    torch::nn::Module& model, torch::optim::Optimizer& optimizer, int64_t world_size = 1);

/// The check load_training_checkpoint() makes: the keys of
/// checkpoint_compatibility_keys() in `saved_json` (a checkpoint's config, as
/// written by this or an earlier dash-train: keys under earlier names, enums by any
/// of their names, keys added since absent) have `config`'s values; else an error
/// naming the first that differs and `path`.
void check_checkpoint_config(const std::string& saved_json, const TrainConfig& config, const std::string& path);

}  // namespace dash_train
