#pragma once

// What every public entry of the solvers' layer asks of its input matrices.

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// Refuses anything but a (b, b) matrix or an (N, b, b) stack of floating-point
/// numbers, naming `caller` (e.g. "dash::inverse_root") and the input's shape or dtype.
void check_square_stack(const at::Tensor& matrices, const char* caller);

}  // namespace dash::linalg
