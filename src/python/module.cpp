// dash._C: the C++ library as a Python extension module.

#include "optim/dash_options.h"
#include "python/bindings.h"
#include "python/option_dict.h"
#include "python/value_errors.h"

#include <dash/inverse_root.h>
#include <dash/option_names.h>
#include <dash/optimizer.h>
#include <dash/root_method_choice.h>

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>
#include <torch/version.h>

namespace py = pybind11;

namespace dash::python {
namespace {

// c10's errors carry a C++ backtrace in what(); Python users get the message, as
// type ValueError for argument errors and RuntimeError for the rest.
void translate_c10_errors(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const c10::ValueError& value_error) {
    PyErr_SetString(PyExc_ValueError, value_error.what_without_backtrace());
  } catch (const c10::IndexError& index_error) {
    PyErr_SetString(PyExc_IndexError, index_error.what_without_backtrace());
  } catch (const c10::Error& c10_error) {
    PyErr_SetString(PyExc_RuntimeError, c10_error.what_without_backtrace());
  }
}

// Keyword options for a root p; a p the method cannot compute is a bad argument.
InverseRootOptions checked_root_options(int64_t p, const py::dict& options) {
  auto root_options = inverse_root_options_from(options);
  as_value_error([&] { check_inverse_root_options(p, root_options); });
  return root_options;
}

// Checks the options for root p, then runs `solve(options)` without the GIL; C++
// warnings (TORCH_WARN) of either part reach Python as Python warnings.
template <typename Solve>
auto with_root_options(int64_t p, const py::dict& options, Solve&& solve) {
  torch::PyWarningHandler warnings_to_python;
  try {
    const auto root_options = checked_root_options(p, options);
    py::gil_scoped_release release;
    return solve(root_options);
  } catch (...) {
    warnings_to_python.set_in_exception();  // the error wins over buffered warnings
    throw;
  }
}

}  // namespace

py::list trials_list(const std::vector<RootMethodTrial>& trials) {
  py::list result;
  for (const auto& trial : trials) {
    py::dict entry;
    entry["method"] = to_string(trial.method);
    entry["ms"] = trial.milliseconds;
    entry["error"] = trial.error;
    entry["meets_accuracy"] = trial.meets_accuracy;
    result.append(entry);
  }
  return result;
}

py::dict solver_methods() {
  py::dict methods;
  for (auto method : kSolverMethods) {
    const auto traits = solver_traits(method);
    py::dict entry;
    entry["matmul_only"] = traits.matmul_only;
    entry["newton_iteration"] = traits.newton_iteration;
    entry["fixed_degree"] = traits.fixed_degree;
    methods[py::str(to_string(method))] = entry;
  }
  return methods;
}

void bind_inverse_root(py::module_& module) {
  module.def(
      "inverse_root",
      [](const at::Tensor& matrices, int64_t p, const py::kwargs& options) {
        return with_root_options(p, options,
            [&](const InverseRootOptions& root_options) { return inverse_root(matrices, p, root_options); });
      },
      py::arg("matrices"), py::arg("p"));
  module.def(
      "inverse_root_with_diagnostics",
      [](const at::Tensor& matrices, int64_t p, const py::kwargs& options) {
        auto result = with_root_options(p, options, [&](const InverseRootOptions& root_options) {
          return inverse_root_with_diagnostics(matrices, p, root_options);
        });
        return py::make_tuple(result.root, result.residual, result.finite);
      },
      py::arg("matrices"), py::arg("p"));
  module.def(
      "choose_root_method",
      [](const at::Tensor& matrices, int64_t p, const py::kwargs& options) {
        py::dict any_method(options);  // the method is what is chosen: whatever was passed is ignored
        any_method["method"] = "auto";
        auto choice = with_root_options(p, any_method, [&](const InverseRootOptions& root_options) {
          InverseRootWorkspace workspace;
          return choose_root_method(matrices, p, root_options, workspace);
        });
        py::dict result;
        result["method"] = to_string(choice.method);
        result["trials"] = trials_list(choice.trials);
        return result;
      },
      py::arg("matrices"), py::arg("p"));
  module.def(
      "estimate_spectral_scale",
      [](const at::Tensor& matrices, const py::kwargs& options) {
        // Every method takes p = 1.
        return with_root_options(/*p=*/1, options, [&](const InverseRootOptions& root_options) {
          return estimate_spectral_scale(matrices, root_options.scaling(), root_options.precision());
        });
      },
      py::arg("matrices"));
}

// The lists (families, solvers) and the options' defaults and checks.
void bind_names_and_options(py::module_& module) {
  module.def(
      "preconditioners",
      [] {
        py::list names;
        for (auto family : kPreconditioners) names.append(py::str(to_string(family)));
        return names;
      },
      "Every preconditioner family's name (C++ dash::kPreconditioners).");
  module.def("solver_methods", solver_methods,
      "Every root solver's name (C++ dash::kSolverMethods) with its traits (dash::SolverTraits).");
  module.def(
      "default_options", [] { return to_dict(DashOptions()); }, "Every dash.Dash keyword with its default value.");
  module.def(
      "validate_options", [](const py::dict& options) { dash_options_from(options, /*ignore_unknown=*/false); },
      "Raises ValueError naming the first unknown or out-of-range option.");
  module.def(
      "state_layout",
      [](const py::dict& options) { return optim::state_layout(dash_options_from(options, /*ignore_unknown=*/false)); },
      "What the options decide of the state's shapes (two option sets with the same layout share a state).");
}

}  // namespace dash::python

PYBIND11_MODULE(_C, module) {
  module.doc() = "dash's C++ library (DASH: batched block Shampoo); use it through the dash package";
  module.attr("torch_version") = TORCH_VERSION;
  py::register_local_exception_translator(dash::python::translate_c10_errors);
  dash::python::bind_inverse_root(module);
  dash::python::bind_names_and_options(module);
  dash::python::bind_optimizer(module);
}
