#pragma once

// Number formatting for the benchmark tables.

#include <cstdio>
#include <string>

namespace dash::bench {

inline std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

inline std::string scientific(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1e", value);
  return buffer;
}

}  // namespace dash::bench
