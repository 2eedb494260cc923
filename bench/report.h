#pragma once

// Formatting and writing of the benchmark reports.

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
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

/// Writes `report` to `path` (nothing when `path` is empty) and says so on stdout.
inline void write_json_report(const nlohmann::json& report, const std::string& path) {
  if (path.empty()) return;
  std::ofstream file(path);
  file << report.dump(2) << "\n";
  file.flush();
  if (!file) throw std::runtime_error("cannot write --json file '" + path + "' (a full disk?)");
  std::cout << "wrote " << path << "\n";
}

}  // namespace dash::bench
