#pragma once

// Distributed Shampoo's bounded-failure policy (DashOptions::
// max_consecutive_root_failures): a factor whose roots failed that many
// computations in a row leaves its preconditioner stale, and the step raises.

#include <torch/optim/optimizer.h>

#include "blocking/stack_plan.h"
#include "optim/root_refresh.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace dash::optim {

/// Whether some factor of `states` (one per factor stack of `stacks`) has failed
/// its group's limit of root computations in a row, as a () float tensor on the
/// device for the step's one read back; undefined when no group sets a limit.
at::Tensor root_failure_limit_exceeded(const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// Raises, naming the first stack over its limit, or another rank's when none here
/// is (host reads: this is the error path).
void raise_root_failure_limit(const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups);

}  // namespace dash::optim
