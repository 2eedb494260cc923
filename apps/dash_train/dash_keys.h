#pragma once

// dash-train's DASH keys, generated from the optimizer's option lists
// (src/optim/option_fields.h, src/linalg/root_option_fields.h): each option under
// its Python keyword, with the list's help text and DashOptions' default, but for
// the few that dash_train_defaults() changes, each with its reason.

#include <dash/optimizer_options.h>

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace dash_train {

/// The options a dash-train run of DASH starts from.
dash::DashOptions dash_train_defaults();

struct DashKey {
  std::string name;
  std::string help;
  bool checkpoint_relevant;  ///< a change makes an existing checkpoint unusable
};

/// Every DASH key, in the option lists' order: all options but those dash-train sets
/// itself (lr, weight_decay and the betas and ε that its keys beta1, beta2 and eps
/// give both optimizers; decay_one_dimensional, as the AdamW baseline; maximize).
const std::vector<DashKey>& dash_keys();

/// The key's value in `options` (an enum by its name).
nlohmann::json dash_key_value(const dash::DashOptions& options, const std::string& name);

/// The DASH keys whose value in `options` is not dash_train_defaults()'s.
std::vector<std::string> changed_dash_keys(const dash::DashOptions& options);

/// Sets key `name` from `value`; false when it is not a DASH key. A value of the
/// wrong kind or an unknown name is an error naming the key and `source`.
bool set_dash_key(
    dash::DashOptions& options, const std::string& name, const nlohmann::json& value, const std::string& source);

/// The name a key has now, for configs and checkpoints of earlier runs (four DASH
/// keys took their Python keyword's name); other names as they are.
std::string current_key_name(const std::string& name);

}  // namespace dash_train
