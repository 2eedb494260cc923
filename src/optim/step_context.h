#pragma once

// What one step works with, decided on the host before any tensor work: the
// engine's phases and the preconditioner families (optim/preconditioner.h) read it.

#include "optim/dash_options.h"
#include "optim/workspace_budget.h"

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace dash::optim {

struct StepWrite;  // optim/distributor.h

struct StepContext {
  const std::vector<torch::optim::OptimizerParamGroup>* groups = nullptr;
  WorkspaceBudget budget;      // the groups' workspace_limit
  bool keep_gradients = true;  // no limit: every stack gathered once and kept
  /// Per parameter, its gradient as the step found it (undefined: none): read once,
  /// where the caller is safe from concurrent changes (Python's binding under the
  /// GIL), and never again from the parameters, which another thread may be giving
  /// new gradients meanwhile.
  std::vector<at::Tensor> gradients;
  std::vector<bool> has_grad;                // per parameter
  std::vector<std::vector<int64_t>> active;  // per gradient stack: blocks with a gradient
  std::vector<bool> stack_complete;          // every block of the stack has one
  /// Per gradient stack and block: t, this step's included (the host's copy, which
  /// schedules t_start and the families' amortised work).
  const std::vector<std::vector<int64_t>>* steps = nullptr;
  std::vector<double> decay;         // per parameter: W's factor 1 − lr·wd
  const StepWrite* write = nullptr;  // where the directions go
  bool decision_read = true;         // the step read its decision back (gradients_usable)
  bool amortised_work_done = false;  // some family's amortised work (a root) was due

  const DashOptions& options(int64_t group) const { return options_of((*groups)[group]); }
  /// Whether the step checks the gradients of `group` (its non_finite_gradients).
  bool checks(int64_t group) const { return options(group).non_finite_gradients() != NonFiniteGradients::Unchecked; }
};

}  // namespace dash::optim
