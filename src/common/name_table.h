#pragma once

// Enum ↔ name tables for the option names each layer declares next to its enums
// (to_string / parse_* in root_options.h, optimizer_options.h, distributed.h). Parsing is
// case-insensitive and rejects an unknown name with the list of valid ones.

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <utility>

namespace dash::common {

/// The first name listed for a value is its canonical name; later ones are aliases.
template <typename Enum>
using NameTable = std::initializer_list<std::pair<const char*, Enum>>;

template <typename Enum>
std::string name_of(const NameTable<Enum>& table, Enum value) {
  for (const auto& [name, entry] : table) {
    if (entry == value) return name;
  }
  TORCH_CHECK(false, "dash: enum value ", static_cast<int>(value), " has no name");
}

/// `what` names the kind of value in the error ("root method").
template <typename Enum>
Enum parse(const NameTable<Enum>& table, const std::string& name, const char* what) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string valid;
  for (const auto& [candidate, value] : table) {
    if (lower == candidate) return value;
    valid += valid.empty() ? candidate : std::string(", ") + candidate;
  }
  TORCH_CHECK(false, "dash: unknown ", what, " '", name, "'; valid: ", valid);
}

}  // namespace dash::common
