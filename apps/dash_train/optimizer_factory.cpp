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

std::unique_ptr<torch::optim::Optimizer> make_dash(const TrainConfig& config, const std::vector<at::Tensor>& params,
    std::shared_ptr<const dash::DistributedContext> distributed) {
  const auto root = dash::InverseRootOptions()
                        .method(dash::parse_root_method(config.root_method))
                        .precision(dash::parse_matmul_precision(config.precision))
                        .epsilon(config.root_epsilon)
                        .relative_epsilon(config.root_relative_epsilon)
                        .auto_max_error(config.auto_max_error)
                        .scaling(dash::SpectralScaleOptions()
                                     .method(dash::parse_scaling(config.scaling))
                                     .iterations(config.power_iterations))
                        .newton(dash::NewtonOptions().steps(config.newton_steps))
                        .chebyshev(dash::ChebyshevOptions().degree(config.chebyshev_degree))
                        .eigen(dash::EigenOptions()
                                   .refresh_tolerance(config.eigen_refresh_tolerance)
                                   .warm_iterations(config.eigen_warm_iterations))
                        .newton_db(dash::NewtonDBOptions()
                                       .polynomial(dash::parse_newton_db_polynomial(config.ndb_polynomial))
                                       .interval_min(config.minimax_interval_min)
                                       .evaluation(dash::parse_newton_db_evaluation(config.ndb_evaluation)));
  const auto options = dash::DashOptions(config.lr)
                           .beta_grad(config.beta1)
                           .beta_graft(config.beta2)
                           .eps_graft(config.eps)
                           .beta_factor(config.beta_factor)
                           .block_size(config.block_size)
                           .root_frequency(config.root_frequency)
                           .start_step(config.start_step)
                           .root(root)
                           .grafting(dash::parse_grafting_type(config.grafting))
                           .weight_decay(config.weight_decay)
                           .decay_one_dimensional(false)  // as the AdamW baseline's group of vectors
                           .adamw_betas(std::make_tuple(config.beta1, config.beta2))
                           .adamw_eps(config.eps)
                           .execution(dash::parse_execution(config.execution))
                           .preconditioning_precision(dash::parse_matmul_precision(config.preconditioning_precision))
                           .workspace_limit(config.workspace_limit)
                           .factor_precision(dash::parse_matmul_precision(config.factor_precision))
                           .root_precision(dash::parse_matmul_precision(config.root_precision))
                           .moment_precision(dash::parse_matmul_precision(config.moment_precision));
  return std::make_unique<dash::Dash>(params, options, std::move(distributed));
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& config,
    const std::vector<at::Tensor>& params, std::shared_ptr<const dash::DistributedContext> distributed) {
  config.check();
  return config.optimizer == "dash" ? make_dash(config, params, std::move(distributed)) : make_adamw(config, params);
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

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace dash_train
