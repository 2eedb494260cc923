#pragma once

// LAPACK over a CPU stack: eigh and QR of each range of matrices that
// for_each_stack_range() gives a core (core_ranges.h), with a single-threaded BLAS;
// elsewhere than on a CPU one ATen call on the whole stack.

#include <ATen/core/Tensor.h>

#include <tuple>

namespace dash::kernels {

/// at::linalg_eigh of an (N, b, b) stack through for_each_stack_range(): returns
/// the eigenvalues (N, b), ascending, and writes the eigenvectors (columns) into
/// `vectors` (N, b, b). LAPACK overwrites its input with the eigenvectors, so a
/// `vectors` whose matrices are column-major (a transposed contiguous buffer,
/// column_major_view()) is worked in place; any other layout costs a temporary
/// and a copy.
at::Tensor stack_eigh(const at::Tensor& stack, const at::Tensor& vectors);

/// A (N, b, b) view of `buffer` (contiguous, the stack's shape) whose matrices are
/// column-major: what LAPACK writes without a copy.
at::Tensor column_major_view(const at::Tensor& buffer);

/// at::linalg_qr (reduced) of an (N, b, b) stack through for_each_stack_range(): Q, R.
std::tuple<at::Tensor, at::Tensor> stack_qr(const at::Tensor& stack);

}  // namespace dash::kernels
