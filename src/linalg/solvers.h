#pragma once

// The inverse-root solvers on a normalised stack Â = (A + εI)/s, whose spectrum
// lies in (0, 1] (Frobenius scaling) or (0, ~1/margin] (power iteration).
// Each returns Â^{-1/p}; inverse_root() undoes the scaling with s^{-1/p}.
// Working in normalised units keeps 16-bit matmuls in range for any input scale.
//
// All are pure functions of their arguments; all work on (N, b, b) stacks.

#include <dash/inverse_root.h>

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// eigh-based root with the options' eigenvalue heuristic. `epsilon` (N, 1, 1) is
/// the regularisation in normalised units (ε/s).
at::Tensor eigen_root(
    const at::Tensor& normalized,
    const at::Tensor& epsilon,
    int64_t p,
    const InverseRootOptions& options);

/// Coupled Newton (Guo & Higham 2006, eq. 3.1–3.2; spec §5).
at::Tensor coupled_newton_root(
    const at::Tensor& normalized,
    int64_t p,
    const InverseRootOptions& options);

/// Newton–Denman–Beavers square-root passes (spec §5); p = 1 or a power of two.
at::Tensor newton_db_root(
    const at::Tensor& normalized,
    int64_t p,
    const InverseRootOptions& options);

/// Chebyshev interpolant of x^{-1/p} evaluated by Clenshaw's recurrence (spec §5).
/// `epsilon` (N, 1, 1) is ε/s and bounds the fitted interval from below.
at::Tensor chebyshev_root(
    const at::Tensor& normalized,
    const at::Tensor& epsilon,
    int64_t p,
    const InverseRootOptions& options);

/// Early stop of the Newton solvers: true on the steps where the tolerance is to
/// be checked (only when the options ask for a tolerance).
bool is_tolerance_check_step(int64_t step, const InverseRootOptions& options);

/// True when every matrix's residual (N,) is within the options' tolerance. This is
/// the only host read-back of the iterative solvers, and it runs only on check steps.
bool all_within_tolerance(const at::Tensor& residual, const InverseRootOptions& options);

/// ‖R‖_F / √b per matrix of a residual stack R (N, b, b) → (N,).
at::Tensor relative_frobenius(const at::Tensor& residual);

}  // namespace dash::linalg
