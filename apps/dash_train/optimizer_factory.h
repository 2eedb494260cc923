#pragma once

// Builds the optimizer a TrainConfig names, and its learning-rate schedule.

#include "train_config.h"

#include <dash/distributed.h>
#include <dash/optimizer.h>

#include <torch/optim/optimizer.h>

#include <memory>

namespace dash_train {

/// adamw: torch::optim::AdamW, weight decay on matrices only. dash: dash::Dash with
/// the config's root solver, scaling, precision, frequency and block size; 1-D
/// parameters go to its built-in AdamW. Both use (beta1, beta2, eps) for Adam-style
/// statistics, so the two differ only in how matrices are preconditioned.
/// With a distributed context, DASH splits its blocks over the ranks (AdamW is
/// replicated: its state is elementwise and its step cheap).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& config,
    const std::vector<at::Tensor>& params, std::shared_ptr<const dash::DistributedContext> distributed = nullptr);

/// Learning rate of `step` (0-based): linear warm-up to lr over warmup_steps, then
/// cosine decay to lr · min_lr_ratio at the last step.
double scheduled_lr(const TrainConfig& config, int64_t step);

/// Sets every parameter group's lr.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace dash_train
