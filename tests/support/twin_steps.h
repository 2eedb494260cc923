#pragma once

// Two optimizers over twin parameters (same values, possibly another device or
// layout), stepped on the same gradients: for tests that compare how they move.

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <vector>

namespace dash::testing {

/// Gives each parameter and its twin the same random gradient (each its own
/// copy, on the twin's device), then steps both optimizers.
inline void step_twins(std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer,
    std::vector<at::Tensor>& twins, torch::optim::Optimizer& twin_optimizer, at::Generator& generator) {
  for (size_t i = 0; i < params.size(); ++i) {
    auto grad = at::randn(params[i].sizes(), generator);
    params[i].mutable_grad() = grad;
    twins[i].mutable_grad() = grad.to(twins[i].device(), grad.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  }
  optimizer.step();
  twin_optimizer.step();
}

}  // namespace dash::testing
