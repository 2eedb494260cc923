#pragma once

// A config key's JSON value as the key's C++ type, strict about kinds (a bool is
// not a number, 3.5 is not an integer); errors name the key and where it came from.

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace dash_train {

/// Whether a JSON value is an integer that int64_t holds (3 and 3.0 are; 3.5,
/// 1e30 and 2^64 − 1 are not).
bool is_int64(const nlohmann::json& value);

/// `value` as a Value (std::string, bool, int64_t or double); `where` names the
/// key and its source for the error, e.g. "'lr' (command line)".
template <typename Value>
Value json_value_as(const nlohmann::json& value, const std::string& where) {
  if constexpr (std::is_same_v<Value, std::string>) {
    TORCH_CHECK(
        value.is_string(), "dash-train: ", where, " expects a string, got ", value.type_name(), " ", value.dump());
    return value.get<std::string>();
  } else if constexpr (std::is_same_v<Value, bool>) {
    TORCH_CHECK(value.is_boolean(), "dash-train: ", where, " expects true or false, got ", value.dump());
    return value.get<bool>();
  } else if constexpr (std::is_same_v<Value, int64_t>) {
    TORCH_CHECK(is_int64(value), "dash-train: ", where, " expects an integer in [-2^63, 2^63), got ", value.dump());
    return value.get<int64_t>();
  } else {
    static_assert(std::is_same_v<Value, double>);
    TORCH_CHECK(value.is_number(), "dash-train: ", where, " expects a number, got ", value.dump());
    return value.get<double>();
  }
}

}  // namespace dash_train
