#include "arguments.h"

#include <sstream>
#include <stdexcept>

namespace dash::bench {

Arguments::Arguments(const std::vector<std::string>& args, std::map<std::string, std::string> known)
    : values_(std::move(known)) {
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
    values_[arg.substr(2)] = args[++i];
  }
}

const std::string& Arguments::text(const std::string& name) const { return values_.at(name); }

long long Arguments::integer(const std::string& name) const {
  try {
    size_t used = 0;
    long long value = std::stoll(text(name), &used);
    if (used == text(name).size()) return value;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects an integer, got '" + text(name) + "'");
}

double Arguments::real(const std::string& name) const {
  try {
    size_t used = 0;
    double value = std::stod(text(name), &used);
    if (used == text(name).size()) return value;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects a number, got '" + text(name) + "'");
}

std::vector<std::string> Arguments::list(const std::string& name) const {
  std::vector<std::string> items;
  std::stringstream stream(text(name));
  for (std::string item; std::getline(stream, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace dash::bench
