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

/// Writes into `out` (a () float tensor on the device, for the step's one read
/// back) how far the worst factor of `states` (one per factor stack of `stacks`) is
/// past its group's limit of root computations failed in a row: the largest
/// consecutive failures − limit + 1 over the stacks whose group sets a limit,
/// clamped at 0, so positive exactly when some factor has reached its limit.
/// `worst` ((stacks + 1,) int64 on the device, kept by the caller) holds each
/// stack's worst count: nothing is allocated, so a step may do this every time
/// (the groups' limits may change between steps).
void root_failure_excess_into(at::Tensor out, at::Tensor worst, const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// Raises, naming the first stack over its limit, or another rank's when none here
/// is (host reads: this is the error path).
void raise_root_failure_limit(const std::vector<blocking::FactorStack>& stacks,
    const std::vector<FactorStackState>& states, const std::vector<torch::optim::OptimizerParamGroup>& groups);

}  // namespace dash::optim
