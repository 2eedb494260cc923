#pragma once

// The message of the c10::Error a call raises, for asserting on its wording.

#include <c10/util/Exception.h>

#include <functional>
#include <string>

namespace dash::testing {

inline std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const c10::Error& error) {
    return error.what_without_backtrace();
  }
  return "<no error>";
}

}  // namespace dash::testing
