#pragma once

// The training loop of dash-train: batches, forward/backward/step with timing,
// lr schedule, clipping, validation, logs, checkpoints and resume.

#include "llama.h"
#include "run_folder.h"
#include "text_corpus.h"
#include "token_batches.h"
#include "train_config.h"
#include "training_checkpoint.h"

#include <dash/distributed.h>

#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dash_train {

struct TrainResult {
  int64_t steps = 0;      ///< steps completed (== config.steps unless stopped by stop_at)
  bool finished = false;  ///< reached config.steps
  double final_validation_loss = 0.0;
  std::vector<ValidationPoint> validation;
  // Means over the steps this process ran (after a resume: since the resume).
  double forward_ms = 0.0;
  double backward_ms = 0.0;              ///< backward + gradient averaging + clipping
  double optimizer_ms = 0.0;             ///< optimizer.step()
  double tokens_per_second = 0.0;        ///< all ranks together
  int64_t optimizer_bytes_per_step = 0;  ///< distributed DASH's collectives, sent plus received by this rank
  int64_t root_failures = 0;             ///< DASH: roots that failed and kept the previous root, this rank
};

class Trainer {
 public:
  /// Builds the model (seeded) and the optimizer; with config.resume, loads the
  /// checkpoint in out_dir/name. The main process holds out_dir/name (RunFolder:
  /// locked; a run already there is an error unless resume or overwrite) until the
  /// trainer is destroyed. With a distributed context of several ranks, this
  /// process is one data-parallel rank: it trains on its shard of the training
  /// text, averages gradients over the ranks, and DASH splits its blocks over them.
  Trainer(TrainConfig config, const TextCorpus& corpus,
      std::shared_ptr<const dash::DistributedContext> distributed = nullptr);

  /// Trains from the current step to stop_at (or steps). A resumed run that has
  /// nothing left to do returns its recorded result and rewrites nothing.
  TrainResult run();
  /// Mean validation loss (nats per byte) of the current parameters.
  double evaluate();

  Llama& model() { return model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  std::string run_dir() const;
  /// Rank 0: out_dir/name/checkpoint.pt; rank r > 0: checkpoint-rank<r>.pt.
  std::string checkpoint_path() const;

 private:
  struct StepTimes {
    double loss = 0.0;
    double forward_ms = 0.0;
    double backward_ms = 0.0;  ///< backward + gradient averaging + clipping
    double optimizer_ms = 0.0;
  };
  StepTimes train_step(int64_t step, double lr, const std::vector<at::Tensor>& parameters);
  void summarize(TrainResult& result, int64_t first_step, int64_t last_step) const;
  void save_checkpoint(int64_t step);
  TrainResult recorded_result() const;
  bool is_main_process() const { return rank_ == 0; }

  TrainConfig config_;
  std::shared_ptr<const dash::DistributedContext> distributed_;
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
  at::Device device_;
  at::Tensor train_tokens_;
  std::vector<TokenBatch> validation_batches_;
  Llama model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<double> lr_scales_;  ///< each group's lr over the schedule's (learning_rate_scales)
  CheckpointProgress progress_;
  std::unique_ptr<RunFolder> folder_;  ///< main process only
};

}  // namespace dash_train
