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
/// With preconditioner spectral_descent, DASH follows Muon's recipe: the hidden
/// matrices in one group, and the matrices `auxiliary` marks (the embedding and the
/// output layer: LlamaImpl::auxiliary_matrices()) with the 1-D parameters in a
/// second on AdamW (Adam's grafting direction for good, bias-corrected), at adamw_lr.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& config,
    const std::vector<at::Tensor>& params, std::shared_ptr<const dash::DistributedContext> distributed = nullptr,
    const std::vector<bool>& auxiliary = {});

/// Each parameter group's lr as a multiple of the schedule's (all 1 but Muon's
/// auxiliary group, adamw_lr / lr).
std::vector<double> learning_rate_scales(const TrainConfig& config, const torch::optim::Optimizer& optimizer);

/// Learning rate of `step` (0-based): linear warm-up to lr over warmup_steps, then
/// cosine decay to lr · min_lr_ratio at the last step.
double scheduled_lr(const TrainConfig& config, int64_t step);

/// Sets parameter group g's lr to lr · scales[g] (learning_rate_scales()).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& scales);

}  // namespace dash_train
