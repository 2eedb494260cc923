#pragma once

// What one step of the Engine works with, decided on the host before any tensor
// work (private to the engine's translation units).

#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/engine.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace dash::optim {

struct Engine::StepContext {
  const std::vector<torch::optim::OptimizerParamGroup>* groups = nullptr;
  WorkspaceBudget budget;                    // the groups' workspace_limit
  bool keep_gradients = true;                // no limit: every stack gathered once and kept
  std::vector<bool> has_grad;                // per parameter
  std::vector<std::vector<int64_t>> active;  // per gradient stack: blocks with a gradient
  std::vector<bool> stack_complete;          // every block of the stack has one
  std::vector<double> decay;                 // per parameter: W's factor 1 − lr·wd
  const StepWrite* write = nullptr;          // where the directions go
  bool decision_read = true;                 // the step read its decision back (gradients_usable)
  bool roots_computed = false;               // some factor's root was due

  const DashOptions& options(int64_t group) const { return options_of((*groups)[group]); }
  /// Whether the step checks the gradients of `group` (its non_finite_gradients).
  bool checks(int64_t group) const { return options(group).non_finite_gradients() != NonFiniteGradients::Unchecked; }
};

}  // namespace dash::optim
