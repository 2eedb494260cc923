#pragma once

// Argument errors from the C++ library, raised to Python as ValueError.

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <string>

namespace dash::python {

/// Runs `call`; a c10::Error it raises becomes a ValueError with its message
/// (without the C++ backtrace) after `prefix`.
template <typename Call>
auto as_value_error(Call&& call, const std::string& prefix = "") -> decltype(call()) {
  try {
    return call();
  } catch (const c10::Error& error) {
    // Under a prefix of its own ("dash: option 'x': "), the message's "dash: " would
    // say the same twice.
    std::string message = error.what_without_backtrace();
    const std::string repeated = "dash: ";
    if (!prefix.empty() && message.rfind(repeated, 0) == 0) message.erase(0, repeated.size());
    throw pybind11::value_error(prefix + message);
  }
}

}  // namespace dash::python
