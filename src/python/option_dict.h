#pragma once

// Options as Python dicts: the keyword names and values that dash.Dash and
// dash.inverse_root take. Every DashOptions field keeps its C++ name; the root
// options are flat, with `method` spelled `root_method` for the optimizer (as
// dash-train's --root-method); enums are their names from <dash/option_names.h>.
// A bad key or value raises ValueError naming it.

#include <dash/inverse_root.h>
#include <dash/optimizer.h>

#include <pybind11/pybind11.h>

namespace dash::python {

/// Every option with its current value: the defaults for DashOptions().
pybind11::dict to_dict(const DashOptions& options);

/// `base` with the entries of `values` applied; keys that are not options raise
/// ValueError unless `ignore_unknown` (param groups also hold scheduler keys).
/// The result is range-checked like dash::Dash does (ValueError naming the option).
DashOptions dash_options_from(const pybind11::dict& values, bool ignore_unknown, const DashOptions& base = {});

/// Root options from keywords (`method`, `scaling`, ... as in InverseRootOptions).
InverseRootOptions inverse_root_options_from(const pybind11::dict& values);

}  // namespace dash::python
