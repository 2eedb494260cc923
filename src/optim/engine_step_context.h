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

  const DashOptions& options(int64_t group) const { return options_of((*groups)[group]); }
};

}  // namespace dash::optim
