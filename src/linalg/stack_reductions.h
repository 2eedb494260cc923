#pragma once

// Per-matrix reductions of an (N, b, b) stack that read it once and allocate only
// (N, 1, 1) results: no stack-sized |A| or isfinite mask.

#include "linalg/scratch.h"

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// max |a_ij| of each matrix, as max(max a, −min a), shape (N, 1, 1).
at::Tensor largest_magnitude(const at::Tensor& stack);

/// Whether every entry of each matrix is finite, shape (N, 1, 1): a matrix's
/// largest and smallest entries are finite exactly when all its entries are
/// (NaN propagates through both reductions).
at::Tensor finite_matrices(const at::Tensor& stack);

/// Whether each matrix is one a root method can take, shape (N, 1, 1): finite,
/// symmetric to within √ε_float32 · max |a_ij|, and (`positive_diagonal`, for the
/// matmul-only solvers, which assume A ⪰ 0) no diagonal entry below
/// −√ε_float32 · max |a_ij| (a positive semi-definite matrix has none). Necessary
/// conditions only, checked on the device without a host sync; the asymmetry
/// goes through a buffer from `scratch`.
at::Tensor admissible_matrices(const at::Tensor& stack, bool positive_diagonal, Scratch& scratch);

/// Whether each root of a stack of (A + εI)^{-1/p} can be taken, shape (N, 1, 1):
/// finite and, for ε > 0, no entry above 2·ε^{-1/p}. (A + εI)^{-1/p} ⪯ ε^{-1/p}·I
/// for A ⪰ 0, so no entry of a true root exceeds ε^{-1/p}; a diverged iteration
/// returns finite roots far above it (16-bit NewtonDB on a rank-deficient factor:
/// 1e26 and more), which would turn an update into Inf. For ε > 0 the bound test
/// alone also rejects NaN and Inf (a NaN magnitude compares false).
at::Tensor acceptable_roots(const at::Tensor& roots, double epsilon, int64_t p);

}  // namespace dash::linalg
