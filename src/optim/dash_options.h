#pragma once

#include <dash/optimizer.h>

#include "blocking/stack_plan.h"
#include "optim/block_update.h"

#include <string>

namespace dash::optim {

/// Rejects out-of-range options with an error naming the option (at construction
/// and before every step, so that setters and param-group edits are checked too).
void check_options(const DashOptions& options);

StepHyper step_hyper(const DashOptions& options);

/// The AdamW hyper-parameters of 1-D/0-D parameters as a grafting step: AdamW is
/// Adam grafting with β_G, β_g = adamw_betas and ε_g = adamw_eps.
StepHyper adamw_hyper(const DashOptions& options);

blocking::GroupBlocking group_blocking(const DashOptions& options);

/// The options that decide the shapes of a group's state (blocking, roots, which
/// moments exist), in words: they are fixed once the state exists.
std::string state_layout(const DashOptions& options);

}  // namespace dash::optim
