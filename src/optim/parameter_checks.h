#pragma once

// What the optimizer accepts: its parameters at construction, their gradients at
// each step. Each refusal is a TORCH_CHECK naming the parameter and the problem.

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace dash::optim {

/// The parameters of `groups` as the optimizer can take them: floating point, on
/// one device, each tensor once, in memory of its own; else a TORCH_CHECK naming
/// the problem.
void check_parameters(const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// Per parameter, whether `gradients` (the step's snapshot of them, one per
/// parameter, undefined: none) has one the step can use (an empty parameter's never
/// counts). Refuses a parameter whose shape changed since
/// `planned_shapes` and a sparse gradient or one of another shape or dtype than
/// its parameter.
std::vector<bool> parameters_with_gradients(const std::vector<at::Tensor>& params,
    const std::vector<at::Tensor>& gradients, const std::vector<std::vector<int64_t>>& planned_shapes);

}  // namespace dash::optim
