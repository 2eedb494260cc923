#pragma once

// Per-matrix reductions of an (N, b, b) stack that read it once and allocate only
// (N, 1, 1) results: no stack-sized |A| or isfinite mask.

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// max |a_ij| of each matrix, as max(max a, −min a), shape (N, 1, 1).
at::Tensor largest_magnitude(const at::Tensor& stack);

/// Whether every entry of each matrix is finite, shape (N, 1, 1): a matrix's
/// largest and smallest entries are finite exactly when all its entries are
/// (NaN propagates through both reductions).
at::Tensor finite_matrices(const at::Tensor& stack);

}  // namespace dash::linalg
