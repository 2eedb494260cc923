#pragma once

// Every preconditioner family by its PreconditionerType (the one switch that knows
// them all; kPreconditioners in <dash/optimizer_options.h> lists them).

#include "optim/preconditioner.h"

#include <memory>
#include <vector>

namespace dash::optim {

/// The family `type` over the gradient stacks of `plan` whose group's options name
/// it, with zero state on the parameters' device and dtype `to`.
std::unique_ptr<Preconditioner> make_preconditioner(PreconditionerType type, const blocking::StackPlan& plan,
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to);

}  // namespace dash::optim
