#pragma once

// The parts of the extension module dash._C, one function per concept; module.cpp
// assembles them. The Python package (python/dash/) is the public face: these
// bindings are thin and take already-named keyword dicts (option_dict.h).

#include <dash/root_method_choice.h>

#include <torch/csrc/utils/pybind.h>

#include <vector>

namespace dash::python {

/// dash._C.inverse_root, inverse_root_with_diagnostics, choose_root_method,
/// estimate_spectral_scale.
void bind_inverse_root(pybind11::module_& module);

/// RootMethod::Auto's trials as a list of dicts (method, ms, error, meets_accuracy).
pybind11::list trials_list(const std::vector<RootMethodTrial>& trials);

/// dash._C.Optimizer: dash::Dash with its param groups' options passed as dicts.
void bind_optimizer(pybind11::module_& module);

}  // namespace dash::python
