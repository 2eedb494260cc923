#include "dash_keys.h"

#include "json_values.h"
#include "optim/option_fields.h"

#include <dash/option_names.h>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <type_traits>

namespace dash {
namespace {

// One option of the lists: its keyword, help, and how to read and write it as JSON.
struct OptionAccess {
  std::string name;
  std::string help;
  std::function<nlohmann::json(const DashOptions&)> get;
  std::function<void(DashOptions&, const nlohmann::json&, const std::string&)> set;
};

template <typename Value>
nlohmann::json option_value_as_json(Value value) {
  if constexpr (std::is_enum_v<Value>) {
    return to_string(value);
  } else {
    return value;
  }
}

template <typename Value>
Value option_value_from_json(const nlohmann::json& value, const std::string& where) {
  if constexpr (std::is_enum_v<Value>) {
    const auto name = dash_train::json_value_as<std::string>(value, where);
    try {
      return optim::option_fields::parse_name(name, static_cast<Value*>(nullptr));
    } catch (const c10::Error& error) {
      TORCH_CHECK(false, "dash-train: ", where, ": ", error.what_without_backtrace());
    }
  } else {
    return dash_train::json_value_as<Value>(value, where);
  }
}

// Every scalar and enum option of DashOptions and its InverseRootOptions.
const std::vector<OptionAccess>& every_option() {
  static const std::vector<OptionAccess> options = [] {
    std::vector<OptionAccess> list;
#define DASH_TRAIN_FIELD(name, type, help)                                                          \
  list.push_back({#name, help, [](const DashOptions& o) { return option_value_as_json(o.name()); }, \
      [](DashOptions& o, const nlohmann::json& v, const std::string& where) {                       \
        o.name(option_value_from_json<type>(v, where));                                             \
      }});
#define DASH_TRAIN_ROOT_FIELD(name, type, path, help)                             \
  list.push_back({optim::option_fields::optimizer_keyword(#name), help,           \
      [](const DashOptions& o) { return option_value_as_json(o.root().path()); }, \
      [](DashOptions& o, const nlohmann::json& v, const std::string& where) {     \
        auto root = o.root();                                                     \
        root.path(option_value_from_json<type>(v, where));                        \
        o.root(root);                                                             \
      }});
    DASH_OPTION_FIELDS(DASH_TRAIN_FIELD)
    DASH_ROOT_FIELDS(DASH_TRAIN_ROOT_FIELD)
#undef DASH_TRAIN_FIELD
#undef DASH_TRAIN_ROOT_FIELD
    return list;
  }();
  return options;
}

}  // namespace
}  // namespace dash

namespace dash_train {
namespace {

// Options that are not DASH keys: dash-train's own keys set them for both
// optimizers (lr, weight_decay; beta1, beta2 and eps give β_G, β_g, the grafting ε
// and the 1-D parameters' AdamW), or it fixes them (1-D parameters undecayed, as
// the AdamW baseline's; a trainer minimises its loss).
bool set_by_dash_train(const std::string& name) {
  for (const char* own : {"lr", "weight_decay", "beta_grad", "beta_graft", "eps_graft", "adamw_eps",
           "decay_one_dimensional", "maximize"}) {
    if (name == own) return true;
  }
  return false;
}

const dash::OptionAccess* find_option(const std::string& name) {
  for (const auto& option : dash::every_option()) {
    if (option.name == name && !set_by_dash_train(name)) return &option;
  }
  return nullptr;
}

}  // namespace

dash::DashOptions dash_train_defaults() {
  return dash::DashOptions()
      // The default model's matrices are 128 wide: blocks of 128 make the runs
      // Shampoo on blocks, as the published comparisons (docs/results.md) were run.
      .block_size(128)
      // A run's arithmetic must not depend on a timing (Auto times batched against
      // per-block roots and may pick either, whose roots differ in their last bits).
      .execution(dash::Execution::Batched);
}

const std::vector<DashKey>& dash_keys() {
  static const std::vector<DashKey> keys = [] {
    std::vector<DashKey> list;
    for (const auto& option : dash::every_option()) {
      if (set_by_dash_train(option.name)) continue;
      // The workspace limit decides memory, not the arithmetic: it may change on resume.
      list.push_back({option.name, option.help, option.name != "workspace_limit"});
    }
    return list;
  }();
  return keys;
}

nlohmann::json dash_key_value(const dash::DashOptions& options, const std::string& name) {
  const auto* option = find_option(name);
  TORCH_CHECK(option != nullptr, "dash-train: '", name, "' is not a DASH key");
  return option->get(options);
}

bool set_dash_key(
    dash::DashOptions& options, const std::string& name, const nlohmann::json& value, const std::string& source) {
  const auto* option = find_option(name);
  if (option == nullptr) return false;
  option->set(options, value, "'" + name + "' (" + source + ")");
  return true;
}

std::string current_key_name(const std::string& name) {
  static const std::map<std::string, std::string> renamed = {{"root_epsilon", "epsilon"},
      {"root_relative_epsilon", "relative_epsilon"}, {"ndb_polynomial", "newton_db_polynomial"},
      {"ndb_evaluation", "newton_db_evaluation"}};
  const auto found = renamed.find(name);
  return found == renamed.end() ? name : found->second;
}

std::vector<std::string> changed_dash_keys(const dash::DashOptions& options) {
  const auto defaults = dash_train_defaults();
  std::vector<std::string> changed;
  for (const auto& key : dash_keys()) {
    if (dash_key_value(options, key.name) != dash_key_value(defaults, key.name)) changed.push_back(key.name);
  }
  return changed;
}

}  // namespace dash_train
