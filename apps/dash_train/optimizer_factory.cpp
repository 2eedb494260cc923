#include "optimizer_factory.h"

#include <dash/optimizer.h>
#include <dash/option_names.h>

#include <torch/optim/adamw.h>

#include <cmath>

namespace dash_train {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::unique_ptr<torch::optim::Optimizer> make_adamw(const TrainConfig& config, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> matrices, vectors;
  for (const auto& param : params) (param.dim() >= 2 ? matrices : vectors).push_back(param);
  auto options = torch::optim::AdamWOptions(config.lr)
                     .betas(std::make_tuple(config.beta1, config.beta2))
                     .eps(config.eps)
                     .weight_decay(config.weight_decay);
  auto vector_options = options;
  vector_options.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(matrices, std::make_unique<torch::optim::AdamWOptions>(options));
  if (!vectors.empty()) {
    groups.emplace_back(vectors, std::make_unique<torch::optim::AdamWOptions>(vector_options));
  }
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

// A start_step no run reaches: the group keeps Adam's grafting direction.
constexpr int64_t kNever = int64_t{1} << 62;

bool follows_muon(const TrainConfig& config) {
  return config.optimizer == "dash" && config.dash.preconditioner() == dash::PreconditionerType::SpectralDescent;
}

std::unique_ptr<torch::optim::Optimizer> make_dash(const TrainConfig& config, const std::vector<at::Tensor>& params,
    std::shared_ptr<const dash::DistributedContext> distributed, const std::vector<bool>& auxiliary) {
  // The DASH keys as set, and dash-train's own keys that both optimizers take.
  const auto options = dash::DashOptions(config.dash)
                           .lr(config.lr)
                           .beta_grad(config.beta1)
                           .beta_graft(config.beta2)
                           .eps_graft(config.eps)
                           .weight_decay(config.weight_decay)
                           .decay_one_dimensional(false)  // as the AdamW baseline's group of vectors
                           .adamw_betas(std::make_tuple(config.beta1, config.beta2))
                           .adamw_eps(config.eps);
  if (!follows_muon(config)) return std::make_unique<dash::Dash>(params, options, std::move(distributed));
  std::vector<at::Tensor> hidden, rest;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool on_adamw = params[i].dim() < 2 || (i < auxiliary.size() && auxiliary[i]);
    (on_adamw ? rest : hidden).push_back(params[i]);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(hidden, std::make_unique<dash::DashOptions>(options));
  if (!rest.empty()) {
    // AdamW whatever the Muon group's settings: Adam's direction, bias-corrected.
    auto adamw = dash::DashOptions(options)
                     .start_step(kNever)
                     .grafting(dash::GraftingType::Adam)
                     .bias_correction(true)
                     .lr(config.adamw_lr > 0.0 ? config.adamw_lr : config.lr);
    groups.emplace_back(rest, std::make_unique<dash::DashOptions>(adamw));
  }
  return std::make_unique<dash::Dash>(std::move(groups), options, std::move(distributed));
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& config,
    const std::vector<at::Tensor>& params, std::shared_ptr<const dash::DistributedContext> distributed,
    const std::vector<bool>& auxiliary) {
  config.check();
  return config.optimizer == "dash" ? make_dash(config, params, std::move(distributed), auxiliary)
                                    : make_adamw(config, params);
}

std::vector<double> learning_rate_scales(const TrainConfig& config, const torch::optim::Optimizer& optimizer) {
  std::vector<double> scales(optimizer.param_groups().size(), 1.0);
  if (follows_muon(config) && scales.size() == 2 && config.adamw_lr > 0.0) scales[1] = config.adamw_lr / config.lr;
  return scales;
}

double scheduled_lr(const TrainConfig& config, int64_t step) {
  if (step < config.warmup_steps) {
    return config.lr * static_cast<double>(step + 1) / static_cast<double>(config.warmup_steps);
  }
  const int64_t decay_steps = config.steps - config.warmup_steps;
  if (decay_steps <= 1) return config.lr;
  const double progress = static_cast<double>(step - config.warmup_steps) / static_cast<double>(decay_steps - 1);
  const double cosine = 0.5 * (1.0 + std::cos(kPi * std::min(progress, 1.0)));
  return config.lr * (config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& scales) {
  auto& groups = optimizer.param_groups();
  TORCH_CHECK(scales.size() == groups.size(), "dash-train: ", scales.size(), " lr scales for ", groups.size(),
      " parameter groups");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lr * scales[g]);
}

}  // namespace dash_train
