#include "arguments.h"

#include <dash/optimizer_options.h>
#include <dash/root_options.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace dash::bench {
namespace {

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

template <typename Value>
Value parse_number(const std::string& name, const std::string& text, const char* what) {
  try {
    size_t used = 0;
    const Value value = std::is_integral_v<Value> ? static_cast<Value>(std::stoll(text, &used))
                                                  : static_cast<Value>(std::stod(text, &used));
    if (used == text.size()) return value;
  } catch (const std::exception&) {  // std::stoll/stod: not a number, or out of range
  }
  throw std::invalid_argument("--" + name + " expects " + what + ", got '" + text + "'");
}

void check_range(const std::string& name, double value, const OptionSpec& spec, const std::string& text) {
  if (!(value >= spec.min && value <= spec.max)) {  // (NaN is in no range)
    throw std::invalid_argument(
        "--" + name + " must be in [" + number_text(spec.min) + ", " + number_text(spec.max) + "], got " + text);
  }
}

}  // namespace

// Opened for writing: the only check that also holds for root and for special
// file systems such as /proc.
void check_output_file(const std::string& name, const std::string& path) {
  if (path.empty()) return;
  errno = 0;
  const bool existed = std::filesystem::exists(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | (existed ? 0 : O_CREAT | O_EXCL), 0644);
  if (fd < 0) {
    throw std::invalid_argument("--" + name + " '" + path + "' cannot be written (" + std::strerror(errno) + ")");
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

OptionSpec integer_option(const std::string& default_value, double min, double max) {
  return {default_value, OptionSpec::Kind::Integer, min, max};
}
OptionSpec real_option(const std::string& default_value, double min, double max) {
  return {default_value, OptionSpec::Kind::Real, min, max};
}
OptionSpec integer_list_option(const std::string& default_value, double min) {
  return {default_value, OptionSpec::Kind::IntegerList, min};
}
OptionSpec real_list_option(const std::string& default_value, double min, double max) {
  return {default_value, OptionSpec::Kind::RealList, min, max};
}
OptionSpec output_file_option() { return {"", OptionSpec::Kind::OutputFile}; }

std::string comma_joined(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

std::string preconditioner_names() {
  std::vector<std::string> names;
  for (auto family : kPreconditioners) names.push_back(to_string(family));
  return comma_joined(names);
}

std::string solver_method_names() {
  std::vector<std::string> names;
  for (auto method : kSolverMethods) names.push_back(to_string(method));
  return comma_joined(names);
}

bool asks_for_help(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

Arguments::Arguments(const std::vector<std::string>& args, std::map<std::string, OptionSpec> known) {
  for (const auto& [name, spec] : known) values_[name] = spec.default_value;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg.rfind("--", 0) != 0 || values_.count(arg.substr(2)) == 0) {
      std::string valid;
      for (const auto& [name, value] : values_) valid += " --" + name;
      throw std::invalid_argument("unknown option '" + arg + "'; valid:" + valid);
    }
    if (i + 1 >= args.size()) {
      throw std::invalid_argument("option '" + arg + "' needs a value");
    }
    given_.insert(arg.substr(2));
    values_[arg.substr(2)] = args[++i];
  }
  for (const auto& [name, spec] : known) check(name, spec);
}

void Arguments::check(const std::string& name, const OptionSpec& spec) const {
  using Kind = OptionSpec::Kind;
  switch (spec.kind) {
    case Kind::Text:
      return;
    case Kind::Integer:
      check_range(name, static_cast<double>(integer(name)), spec, text(name));
      return;
    case Kind::Real:
      check_range(name, real(name), spec, text(name));
      return;
    case Kind::IntegerList:
    case Kind::RealList: {
      std::vector<double> values;
      if (spec.kind == Kind::IntegerList) {
        for (const auto value : integers(name)) values.push_back(static_cast<double>(value));
      } else {
        values = reals(name);
      }
      if (values.empty()) throw std::invalid_argument("--" + name + " needs at least one value");
      for (const auto value : values) check_range(name, value, spec, number_text(value));
      return;
    }
    case Kind::OutputFile:
      check_output_file(name, text(name));
      return;
  }
}

const std::string& Arguments::text(const std::string& name) const { return values_.at(name); }

long long Arguments::integer(const std::string& name) const {
  return parse_number<long long>(name, text(name), "an integer");
}

double Arguments::real(const std::string& name) const { return parse_number<double>(name, text(name), "a number"); }

std::vector<std::string> Arguments::list(const std::string& name) const {
  const auto& value = text(name);
  if (value.empty()) throw std::invalid_argument("--" + name + " needs at least one value");
  std::vector<std::string> items;
  std::stringstream stream(value);
  for (std::string item; std::getline(stream, item, ',');) items.push_back(item);
  if (value.back() == ',') items.emplace_back();  // getline drops a last empty item
  for (const auto& item : items) {
    if (item.empty()) throw std::invalid_argument("--" + name + " has an empty item in '" + value + "'");
  }
  return items;
}

std::vector<long long> Arguments::integers(const std::string& name) const {
  std::vector<long long> values;
  for (const auto& item : list(name)) values.push_back(parse_number<long long>(name, item, "integers"));
  return values;
}

std::vector<double> Arguments::reals(const std::string& name) const {
  std::vector<double> values;
  for (const auto& item : list(name)) values.push_back(parse_number<double>(name, item, "numbers"));
  return values;
}

}  // namespace dash::bench
