#include "python/option_dict.h"

#include "optim/dash_options.h"
#include "optim/option_fields.h"
#include "python/value_errors.h"

#include <dash/option_names.h>

#include <c10/util/Exception.h>

#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

namespace py = pybind11;

namespace dash::python {
namespace {

template <typename Value>
py::object to_python(Value value) {
  if constexpr (std::is_enum_v<Value>) {
    return py::str(to_string(value));
  } else {
    return py::cast(value);
  }
}

[[noreturn]] void bad_value(const std::string& key, const char* expected, py::handle value) {
  throw py::value_error(
      "dash: option '" + key + "' must be " + expected + ", got " + py::repr(value).cast<std::string>());
}

// Strict about kinds (a bool is not a number, a float is not a block size), loose
// about types (numpy scalars and 0-d tensors convert like Python numbers).
template <typename Value>
Value from_python(py::handle value, const std::string& key) {
  if constexpr (std::is_enum_v<Value>) {
    if (!py::isinstance<py::str>(value)) bad_value(key, "a string", value);
    return as_value_error(
        [&] { return optim::option_fields::parse_name(value.cast<std::string>(), static_cast<Value*>(nullptr)); },
        "dash: option '" + key + "': ");
  } else if constexpr (std::is_same_v<Value, bool>) {
    // numpy.bool_ and one-element bool tensors are not Python bools but say what they mean.
    const bool boolean = py::isinstance<py::bool_>(value) ||
                         (py::hasattr(value, "dtype") &&
                             py::str(value.attr("dtype")).cast<std::string>().find("bool") != std::string::npos);
    const int truth = boolean ? PyObject_IsTrue(value.ptr()) : -1;
    if (truth < 0) {
      PyErr_Clear();  // e.g. a bool tensor of several elements
      bad_value(key, "True or False", value);
    }
    return truth == 1;
  } else if constexpr (std::is_same_v<Value, int64_t>) {
    if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr())) bad_value(key, "an integer", value);
    try {
      return py::int_(py::reinterpret_borrow<py::object>(value)).cast<int64_t>();
    } catch (const py::cast_error&) {
      bad_value(key, "an integer that fits in 64 bits", value);
    }
  } else {
    static_assert(std::is_same_v<Value, double>);
    if (py::isinstance<py::bool_>(value) || py::isinstance<py::str>(value)) bad_value(key, "a number", value);
    try {
      return value.cast<double>();
    } catch (const py::cast_error&) {
      bad_value(key, "a number", value);
    }
  }
}

std::tuple<double, double> pair_from_python(py::handle value, const std::string& key) {
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value) || py::len(value) != 2) {
    bad_value(key, "a pair of numbers", value);
  }
  const auto pair = py::reinterpret_borrow<py::sequence>(value);
  return {from_python<double>(pair[0], key + "[0]"), from_python<double>(pair[1], key + "[1]")};
}

// Applies `key = value` to the root options; false if `key` is not a root option.
bool set_root_option(InverseRootOptions& root, const std::string& key, py::handle value, bool optimizer_keys) {
#define DASH_SET_ROOT(name, type, path, help)                                             \
  if (key == (optimizer_keys ? optim::option_fields::optimizer_keyword(#name) : #name)) { \
    root.path(from_python<type>(value, key));                                             \
    return true;                                                                          \
  }
  DASH_ROOT_FIELDS(DASH_SET_ROOT)
#undef DASH_SET_ROOT
  return false;
}

bool set_option(DashOptions& options, const std::string& key, py::handle value) {
#define DASH_SET(name, type, help)               \
  if (key == #name) {                            \
    options.name(from_python<type>(value, key)); \
    return true;                                 \
  }
  DASH_OPTION_FIELDS(DASH_SET)
#undef DASH_SET
  if (key == "adamw_betas") {
    options.adamw_betas(pair_from_python(value, key));
    return true;
  }
  return false;
}

}  // namespace

py::dict to_dict(const DashOptions& options) {
  py::dict values;
#define DASH_GET(name, type, help) values[#name] = to_python(options.name());
#define DASH_GET_ROOT(name, type, path, help) \
  values[optim::option_fields::optimizer_keyword(#name)] = to_python(options.root().path());
  DASH_OPTION_FIELDS(DASH_GET)
  DASH_ROOT_FIELDS(DASH_GET_ROOT)
#undef DASH_GET
#undef DASH_GET_ROOT
  values["adamw_betas"] = py::make_tuple(std::get<0>(options.adamw_betas()), std::get<1>(options.adamw_betas()));
  return values;
}

DashOptions dash_options_from(const py::dict& values, bool ignore_unknown, const DashOptions& base) {
  DashOptions options = base;
  InverseRootOptions root = base.root();
  for (const auto& [key_object, value] : values) {
    const auto key = py::str(key_object).cast<std::string>();
    const bool known = set_option(options, key, value) || set_root_option(root, key, value, /*optimizer_keys=*/true);
    if (!known && !ignore_unknown) throw py::value_error("dash.Dash: unknown option '" + key + "'");
  }
  options.root(root);
  as_value_error([&] { optim::check_options(options); });
  return options;
}

InverseRootOptions inverse_root_options_from(const py::dict& values) {
  InverseRootOptions root;
  for (const auto& [key_object, value] : values) {
    const auto key = py::str(key_object).cast<std::string>();
    if (!set_root_option(root, key, value, /*optimizer_keys=*/false)) {
      throw py::value_error("dash.inverse_root: unknown option '" + key + "'");
    }
  }
  return root;
}

}  // namespace dash::python
