#pragma once

// The training loop of dash-train: batches, forward/backward/step with timing,
// lr schedule, clipping, validation, logs, checkpoints and resume.

#include "llama.h"
#include "text_corpus.h"
#include "token_batches.h"
#include "train_config.h"
#include "training_checkpoint.h"

#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dash_train {

/// Data-parallel context of this process. The default is a single process.
struct DataParallel {
  int64_t rank = 0;
  int64_t world_size = 1;
  /// Averages the gradients over ranks in place; empty for one process.
  std::function<void(const std::vector<at::Tensor>& gradients)> average_gradients;
};

struct TrainResult {
  int64_t steps = 0;        ///< steps completed (== config.steps unless stopped by stop_at)
  bool finished = false;    ///< reached config.steps
  double final_validation_loss = 0.0;
  std::vector<ValidationPoint> validation;
  // Means over the steps this process ran (after a resume: since the resume).
  double forward_ms = 0.0;
  double backward_ms = 0.0;   ///< backward + gradient averaging + clipping
  double optimizer_ms = 0.0;  ///< optimizer.step()
  double tokens_per_second = 0.0;
};

class Trainer {
 public:
  /// Builds the model (seeded) and the optimizer; with config.resume, loads the
  /// checkpoint in out_dir/name.
  Trainer(TrainConfig config, const TextCorpus& corpus, DataParallel parallel = {});

  TrainResult run();
  /// Mean validation loss (nats per byte) of the current parameters.
  double evaluate();

  Llama& model() { return model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  std::string run_dir() const;
  std::string checkpoint_path() const;

 private:
  void save_checkpoint(int64_t step);
  bool is_main_process() const { return parallel_.rank == 0; }

  TrainConfig config_;
  DataParallel parallel_;
  at::Device device_;
  at::Tensor train_tokens_;
  std::vector<TokenBatch> validation_batches_;
  Llama model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  CheckpointProgress progress_;
};

}  // namespace dash_train
