#include "optim/saved_entries.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::optim {
namespace {

// The block number j of an entry "block.<j>.<field>" written as std::to_string
// writes it (no sign, no leading zero: one name per block), and its field; -1 for
// any other name.
std::pair<int64_t, std::string> block_entry(const std::string& name) {
  if (name.rfind("block.", 0) != 0) return {-1, ""};
  const auto dot = name.find('.', 6);
  if (dot == std::string::npos) return {-1, ""};
  const auto number = name.substr(6, dot - 6);
  const bool numeric = !number.empty() && number.size() < 10 && (number == "0" || number[0] != '0') &&
                       std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!numeric) return {-1, ""};
  return {std::stoll(number), name.substr(dot + 1)};
}

}  // namespace

std::string block_prefix(int64_t number) { return "block." + std::to_string(number) + "."; }

std::string SavedEntries::what(size_t param, const std::string& name) {
  return "parameter " + std::to_string(param) + "'s state entry '" + name + "'";
}

SavedEntries::SavedEntries(const std::vector<ParameterState>& states, const std::vector<int64_t>& blocks,
    const std::function<bool(size_t, const std::string&)>& is_block_field,
    const std::vector<std::string>& segment_fields) {
  for (size_t p = 0; p < states.size(); ++p) {
    auto& entries = saved_.emplace_back();
    for (const auto& [name, tensor] : states[p]) {
      bool known = false;
      if (blocks[p] > 0) {
        const auto [number, field] = block_entry(name);
        known = number >= 0 && number < blocks[p] && is_block_field(p, field);
      } else {
        known = std::find(segment_fields.begin(), segment_fields.end(), name) != segment_fields.end();
      }
      TORCH_CHECK(known, "dash::Dash: parameter ", p, "'s state has an entry '", name, "' that a parameter of ",
          blocks[p] > 0 ? std::to_string(blocks[p]) + " blocks" : std::string("AdamW"),
          " does not have (saved for other parameters or options?)");
      TORCH_CHECK(tensor.defined(), "dash::Dash: ", what(p, name), " is undefined");
      TORCH_CHECK(entries.emplace(name, tensor).second, "dash::Dash: parameter ", p, "'s state has '", name,
          "' twice (the same block saved by two ranks?)");
    }
  }
}

at::Tensor SavedEntries::find(size_t param, const std::string& name) const {
  const auto found = saved_[param].find(name);
  return found == saved_[param].end() ? at::Tensor() : found->second;
}

at::Tensor SavedEntries::required(size_t param, const std::string& name) const {
  auto tensor = find(param, name);
  TORCH_CHECK(tensor.defined(), "dash::Dash: parameter ", param, "'s state has no '", name,
      "' (one rank's state on another world size? load_sharded_state_dicts, or load_resharded in C++, takes every "
      "rank's)");
  return tensor;
}

}  // namespace dash::optim
