#pragma once

#include <dash/optimizer_options.h>

#include <c10/util/Exception.h>

#include "blocking/stack_plan.h"
#include "optim/block_state.h"

#include <string>
#include <vector>

namespace dash::optim {

/// A parameter group's options (every group of a dash::Dash holds DashOptions; a
/// group given another optimizer's options is an error naming it).
inline const DashOptions& options_of(const torch::optim::OptimizerParamGroup& group) {
  const auto* options = dynamic_cast<const DashOptions*>(&group.options());
  TORCH_CHECK(options != nullptr, "dash::Dash: a parameter group holds another optimizer's options (not DashOptions)");
  return *options;
}

/// Rejects out-of-range options with an error naming the option (at construction
/// and before every step, so that setters and param-group edits are checked too).
void check_options(const DashOptions& options);

/// TORCH_CHECK that `value`, an option named `name` used in float32 arithmetic, is
/// in [0, FLT_MAX]: above it float32 has Inf.
void check_float32_range(double value, const char* name);

StepHyper step_hyper(const DashOptions& options);

/// The AdamW hyper-parameters of 1-D/0-D parameters as a grafting step: AdamW is
/// Adam grafting with β_G, β_g = adamw_betas and ε_g = adamw_eps.
StepHyper adamw_hyper(const DashOptions& options);

blocking::GroupBlocking group_blocking(const DashOptions& options);

/// One option that decides the shapes of a group's state (which blocks, roots and
/// moments exist): such options are fixed once the state exists, and every rank of
/// a distributed optimizer must share them.
struct StateShapingOption {
  const char* name;    ///< the option's name
  const char* key;     ///< its key in groups_signature()
  int64_t value;       ///< what ranks and checkpoints must agree on
  std::string layout;  ///< what the state's shapes depend on, in words (state_layout())
};

/// The one list of state-shaping options, with their values in `options`.
std::vector<StateShapingOption> state_shaping_options(const DashOptions& options);

/// Their names, comma-separated, for messages.
std::string state_shaping_option_names();

/// The state-shaping options' layouts, in words: a group whose layout changes after
/// the state was built is an error.
std::string state_layout(const DashOptions& options);

/// The parameters' shapes and the state-shaping options' values, per group: what
/// every rank of a distributed optimizer must agree on, and what a checkpoint was
/// saved for. `before_families`: without the preconditioner family, as checkpoints
/// of format 1 (written before there were families) signed it.
std::string groups_signature(const std::vector<torch::optim::OptimizerParamGroup>& groups, bool with_shapes = true,
    bool before_families = false);

}  // namespace dash::optim
