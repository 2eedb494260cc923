#pragma once

// Per-matrix reductions of an (N, b, b) stack that read it once and allocate only
// (N, 1, 1) results (no stack-sized |A| or isfinite mask), and the admission of a
// stack for a root method, whose one stack-sized result is the copy it admits.
//
// On a CPU, float32 and float64 stacks whose rows are contiguous are read by
// loops of their own, one matrix at a time, so that each matrix is read from
// memory once and its further passes (the asymmetry, the copy that
// admit_matrices() writes) find it in cache; over the cores by for_each_pass_range()
// (core_ranges.h). ATen's reductions take one pass over the stack each, and its
// a − aᵀ reads one operand across rows: as ATen ops the checks in front of a root
// computation took several passes' time (docs/experiments/2026-12-05-memory-passes.md, "Memory
// passes around the roots"). Elsewhere (GPUs, other dtypes) the same results come from
// ATen's reductions.

#include "kernels/scratch.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace dash::kernels {

/// max |a_ij| of each matrix, shape (N, 1, 1); NaN where a matrix has a NaN entry
/// (so that a comparison with it is false), as max(max a, −min a) is.
at::Tensor largest_magnitude(const at::Tensor& stack);

/// max |x| over all of `tensors` (any shapes, any number; empty ones add nothing)
/// as a 0-d float32 view of `buffer` on their device (a float64 entry beyond
/// float32's range gives Inf, as converting it would); NaN where an entry is NaN; 0
/// for none. On a CPU one pass over the cores for all the float32 and float64
/// tensors with contiguous rows, an ∞-norm for each other tensor. `buffer` (float32,
/// one element, and one per tensor the CPU loops do not take) is made or grown where
/// it is too small and kept by the caller: the next call allocates nothing for it,
/// nor for a float32 tensor (nor a 16-bit one on CUDA); another dtype's norm is a
/// 0-d tensor of its own.
at::Tensor largest_magnitude_of_list(const std::vector<at::Tensor>& tensors, at::Tensor& buffer);

/// Whether every entry of each matrix is finite, shape (N, 1, 1).
at::Tensor finite_matrices(const at::Tensor& stack);

/// A stack as a root method takes it (inverse_root's front end, spec §5).
struct AdmittedMatrices {
  /// (N, b, b), a buffer of the Scratch: each admissible matrix, the identity in place of
  /// the others, with `diagonal_shift` added to every diagonal entry.
  at::Tensor matrices;
  /// (N, 1, 1) bool: whether the input matrix is one a root method can take.
  /// Finite, symmetric to within √ε_float32 · max |a_ij|, and (`positive_diagonal`,
  /// for the matmul-only solvers, which assume A ⪰ 0) no diagonal entry below
  /// −√ε_float32 · max |a_ij| (a positive semi-definite matrix has none). Necessary
  /// conditions only, checked on the device without a host sync.
  at::Tensor admissible;
  /// (N, 1, 1): largest_magnitude(matrices), in the stack's dtype.
  at::Tensor magnitude;
};

/// `stack` checked and copied for a root method: an inadmissible matrix is replaced
/// by the identity so that no solver, nor eigh, sees it and the rest of the stack is
/// unaffected. The shift is added in the stack's dtype, as `diagonal().add_()` does.
AdmittedMatrices admit_matrices(
    const at::Tensor& stack, bool positive_diagonal, double diagonal_shift, Scratch& scratch);

/// Whether each root of a stack of (A + εI)^{-1/p} can be taken, shape (N, 1, 1):
/// finite and, for ε > 0, no entry above 2·ε^{-1/p}. (A + εI)^{-1/p} ⪯ ε^{-1/p}·I
/// for A ⪰ 0, so no entry of a true root exceeds ε^{-1/p}; a diverged iteration
/// returns finite roots far above it (16-bit NewtonDB on a rank-deficient factor:
/// 1e26 and more), which would turn an update into Inf. For ε > 0 the bound test
/// alone also rejects NaN and Inf (a NaN magnitude compares false).
at::Tensor acceptable_roots(const at::Tensor& roots, double epsilon, int64_t p);

}  // namespace dash::kernels
