#pragma once

// `--name value` command-line options with defaults, and a clear error for an
// unknown or malformed one.

#include <map>
#include <string>
#include <vector>

namespace dash::bench {

class Arguments {
 public:
  /// `known` maps each accepted option (without "--") to its default value.
  Arguments(const std::vector<std::string>& args, std::map<std::string, std::string> known);

  const std::string& text(const std::string& name) const;
  long long integer(const std::string& name) const;
  double real(const std::string& name) const;
  /// Comma-separated list.
  std::vector<std::string> list(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace dash::bench
