#pragma once

// `--name value` command-line options with defaults. Every option's value is
// checked (type, range, an output file that can be written) when the command line
// is read, so that a bad value fails before anything is measured.

#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dash::bench {

/// An accepted option: its default and what its values must be.
struct OptionSpec {
  enum class Kind { Text, Integer, Real, IntegerList, RealList, OutputFile };

  OptionSpec(const char* default_value) : default_value(default_value) {}  // NOLINT: text options read as literals
  OptionSpec(std::string default_value) : default_value(std::move(default_value)) {}  // NOLINT: and as strings
  OptionSpec(std::string default_value, Kind kind, double min = -std::numeric_limits<double>::infinity(),
      double max = std::numeric_limits<double>::infinity())
      : default_value(std::move(default_value)), kind(kind), min(min), max(max) {}

  std::string default_value;
  Kind kind = Kind::Text;
  double min;  ///< Integer, Real and their lists: every value in [min, max]
  double max;
};

OptionSpec integer_option(
    const std::string& default_value, double min, double max = std::numeric_limits<double>::infinity());
OptionSpec real_option(
    const std::string& default_value, double min, double max = std::numeric_limits<double>::infinity());
OptionSpec integer_list_option(const std::string& default_value, double min);
OptionSpec real_list_option(const std::string& default_value, double min, double max);
/// A file the benchmark writes at the end ("" = none): its folder must exist and be writable.
OptionSpec output_file_option();

/// Fails (std::invalid_argument naming --`name`) unless `path` can be written: opened
/// for writing now, and a file created for the test removed again ("" passes).
void check_output_file(const std::string& name, const std::string& path);

/// Whether the arguments ask for the usage (-h, --help anywhere).
bool asks_for_help(const std::vector<std::string>& args);

/// `names` comma-separated, as list() reads them.
std::string comma_joined(const std::vector<std::string>& names);

/// Every solver's name (dash::kSolverMethods), comma-separated: the default of --methods.
/// Every preconditioner family's name, comma-separated (dash::kPreconditioners).
std::string preconditioner_names();
std::string solver_method_names();

class Arguments {
 public:
  /// `known` maps each accepted option (without "--") to its spec. Throws
  /// std::invalid_argument naming the option for an unknown option or a bad value.
  Arguments(const std::vector<std::string>& args, std::map<std::string, OptionSpec> known);

  const std::string& text(const std::string& name) const;
  long long integer(const std::string& name) const;
  double real(const std::string& name) const;
  /// Whether the command line gave `name` (else it holds its default).
  bool given(const std::string& name) const { return given_.count(name) > 0; }
  /// Comma-separated list; an empty list or an empty item ("1,,2") is refused.
  std::vector<std::string> list(const std::string& name) const;
  std::vector<long long> integers(const std::string& name) const;
  std::vector<double> reals(const std::string& name) const;

 private:
  void check(const std::string& name, const OptionSpec& spec) const;

  std::map<std::string, std::string> values_;
  std::set<std::string> given_;
};

}  // namespace dash::bench
