#pragma once

// A state keyed by parameter being loaded (Dash::load_parameter_states, and every
// checkpoint through it): each parameter's entries by name, checked against the
// names its blocks' field tables give, for the engine and the families to take
// their fields from.

#include <dash/optimizer.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dash::optim {

class SavedEntries {
 public:
  /// `states[p]` is parameter p's, which has `blocks[p]` blocks (0: an AdamW
  /// parameter, whose entries are `segment_fields`' names). A block's entry is
  /// "block.<j>.<field>" with j < blocks[p] and is_block_field(field). Throws,
  /// naming the parameter and entry, on any other name or an undefined tensor.
  SavedEntries(const std::vector<ParameterState>& states, const std::vector<int64_t>& blocks,
      const std::function<bool(size_t param, const std::string& field)>& is_block_field,
      const std::vector<std::string>& segment_fields);

  /// The entry, or an undefined tensor.
  at::Tensor find(size_t param, const std::string& name) const;
  /// The entry; throws, naming it, where it is missing.
  at::Tensor required(size_t param, const std::string& name) const;

  /// "parameter <p>'s state entry '<name>'", for messages.
  static std::string what(size_t param, const std::string& name);

 private:
  std::vector<std::map<std::string, at::Tensor>> saved_;
};

/// A block's entries' prefix, "block.<number>.".
std::string block_prefix(int64_t number);

}  // namespace dash::optim
