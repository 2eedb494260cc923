#pragma once

// Floating-point operation counts of the inverse-root solvers, from the shapes and
// options alone (what a benchmark divides its time by).

#include <dash/inverse_root.h>

#include <cstdint>

namespace dash {

/// FLOPs of inverse_root() on a stack of `count` (b × b) matrices, counting
/// matmuls at 2·m·n·k; elementwise work is left out. EVD uses the textbook
/// 9·b³ for a symmetric eigendecomposition with vectors, plus the reconstruction.
/// Iterative solvers count their fixed steps (an early stop does fewer).
double inverse_root_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options = {});

}  // namespace dash
