#pragma once

// The inverse-root solvers on a normalised stack Â = (A + εI)/s, whose spectrum
// lies in (0, 1] (Frobenius scaling) or (0, ~1/margin] (power iteration).
// Each returns Â^{-1/p}; inverse_root() undoes the scaling with s^{-1/p}.
// Working in normalised units keeps 16-bit matmuls in range for any input scale.
//
// All are pure functions of their arguments and of their own options struct; all
// work on (N, b, b) stacks. Stack-sized temporaries come from `scratch`; the
// returned root lives in a scratch buffer too (free again once dropped).

#include <dash/inverse_root.h>

#include "linalg/minimax_polynomials.h"
#include "kernels/scratch.h"

#include <ATen/core/Tensor.h>

#include <tuple>
#include <vector>

namespace dash::linalg {

/// The step polynomials of each square-root pass of newton_db_root(): Newton–Schulz
/// `newton.steps()` times, or minimax schedules, each pass's made for the spectrum
/// the previous pass leaves. Pure host arithmetic.
std::vector<std::vector<OddPolynomial>> newton_db_schedule(
    int64_t p, const NewtonOptions& newton, const NewtonDBOptions& options, MatmulPrecision precision);

/// Eigenvalues (N, b), returned, and eigenvectors, written into `vectors` (N, b, b;
/// column-major matrices are written in place, stack_lapack.h), by eigh of the
/// stack, retried in float64 if it fails in float32.
at::Tensor batched_eigh(const at::Tensor& a, const at::Tensor& vectors);

/// Q · diag(f(λ)) · Qᵀ with f(λ) = λ^{-1/p} after `heuristic`'s repair: EVD's root.
/// `epsilon` (N, 1, 1) is the regularisation in normalised units (ε/s). The root is
/// S·Sᵀ with S = Q · diag(√f(λ)) (every heuristic gives f ≥ 0), formed in
/// `scaled`, which may be `vectors` itself (then overwritten) or a buffer of its
/// shape.
at::Tensor root_from_eigenbasis(const at::Tensor& values, const at::Tensor& vectors, const at::Tensor& epsilon,
    int64_t p, EigenHeuristic heuristic, MatmulPrecision precision, at::Tensor scaled, kernels::Scratch& scratch);

/// Q · diag(f) · Qᵀ for function values f (N, b) ≥ 0 of the eigenvalues, formed as
/// S·Sᵀ with S = Q · diag(√f) in `scaled` (as root_from_eigenbasis()); f's buffer is
/// overwritten.
at::Tensor root_from_eigenvalue_function(at::Tensor function_values, const at::Tensor& vectors,
    MatmulPrecision precision, at::Tensor scaled, kernels::Scratch& scratch);

/// Updates `basis` to an eigenbasis of each matrix of `a` (N, b, b), warm-started
/// from the previous one (warm_eigen.cpp), judged by the error of the root
/// (a + εI)^{-1/p} it gives (`epsilon` (N, 1, 1)); returns the eigenvalues (N, b).
/// Reads EigenOptions' refresh_tolerance and warm_iterations.
at::Tensor refresh_eigenbasis(
    const at::Tensor& a, const at::Tensor& epsilon, int64_t p, const EigenOptions& options, Eigenbasis& basis);

/// Coupled Newton (Guo & Higham 2006, eq. 3.1–3.2; spec §5).
at::Tensor coupled_newton_root(const at::Tensor& normalized, int64_t p, const NewtonOptions& options,
    MatmulPrecision precision, kernels::Scratch& scratch);

/// Newton–Denman–Beavers square-root passes (spec §5); p = 1 or a power of two.
/// Takes the stack by value: its buffer is reused once the first step has read it.
at::Tensor newton_db_root(at::Tensor normalized, int64_t p, const NewtonOptions& newton, const NewtonDBOptions& options,
    MatmulPrecision precision, kernels::Scratch& scratch);

/// NewtonDBEvaluation::Eigh: the function φ (N, b) that newton_db_root() applies to
/// the eigenvalues `values` (N, b) of a stack (A + εI)/s scaled by its largest entry
/// (an all-zero matrix keeps that scale), run as its scalar iteration (in float64,
/// returned in `values`' dtype), so that Q·diag(φ)·Qᵀ is its root. The spectral
/// scale is NewtonDB's, from the eigenvalues: ‖·‖_F, or `margin`·λ_max where power
/// iteration would estimate λ_max. The regularisation `epsilon` (N, 1, 1), the ε/s
/// already in `values`, is raised as inverse_root() raises the matrix iteration's:
/// to `relative_floor` of the scale (0: none), and to the 16-bit floor of `precision`.
/// `relative_ridge`, where given and `relative_floor` > 0, is set to what the
/// relative floor added to `values`, (N, 1, 1) in their units and dtype (the
/// 16-bit floor is not in it); it stays as it is otherwise.
at::Tensor newton_db_eigenvalue_root(const at::Tensor& values, const at::Tensor& epsilon, int64_t p,
    const NewtonOptions& newton, const NewtonDBOptions& options, const SpectralScaleOptions& scaling,
    MatmulPrecision precision, double relative_floor, at::Tensor* relative_ridge = nullptr);

/// Chebyshev interpolant of x^{-1/p} evaluated by Clenshaw's recurrence (spec §5).
/// `epsilon` (N, 1, 1) is ε/s and bounds the fitted interval from below.
at::Tensor chebyshev_root(const at::Tensor& normalized, const at::Tensor& epsilon, int64_t p,
    const ChebyshevOptions& options, MatmulPrecision precision, kernels::Scratch& scratch);

/// The start vectors of (multi-vector) power iteration, (b, v), entries in [-1, 1),
/// unnormalised: deterministic pseudo-random numbers, the same for every call.
at::Tensor power_start_vectors(int64_t b, int64_t v, const at::TensorOptions& options);

/// estimate_spectral_scale() (<dash/inverse_root.h>) with its temporaries from `scratch`.
/// `magnitude`, where the caller has it: largest_magnitude(matrices)
/// (kernels/stack_reductions.h), (N, 1, 1) for a stack; computed here otherwise.
at::Tensor spectral_scale(const at::Tensor& matrices, const SpectralScaleOptions& options, MatmulPrecision precision,
    kernels::Scratch& scratch, const at::Tensor& magnitude = at::Tensor());

/// Early stop of the Newton solvers: true on the steps where the tolerance is to
/// be checked (only when a tolerance is asked for).
bool is_tolerance_check_step(int64_t step, double tolerance, int64_t check_interval);

/// True when every matrix's residual (N,) is within `tolerance`. This is the only
/// host read-back of the iterative solvers, and it runs only on check steps.
bool all_within_tolerance(const at::Tensor& residual, double tolerance);

/// ‖R‖_F / √b per matrix of a residual stack R (N, b, b) → (N,).
at::Tensor relative_frobenius(const at::Tensor& residual);

}  // namespace dash::linalg
