#pragma once

// The parts of the extension module dash._C, one function per concept; module.cpp
// assembles them. The Python package (python/dash/) is the public face: these
// bindings are thin and take already-named keyword dicts (option_dict.h).

#include <torch/csrc/utils/pybind.h>

namespace dash::python {

/// dash._C.inverse_root, inverse_root_with_diagnostics, estimate_spectral_scale.
void bind_inverse_root(pybind11::module_& module);

/// dash._C.Optimizer: dash::Dash with its param groups' options passed as dicts.
void bind_optimizer(pybind11::module_& module);

}  // namespace dash::python
