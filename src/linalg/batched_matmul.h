#pragma once

// Batched matmul in a chosen input precision, with results in the iterate dtype.

#include <dash/inverse_root.h>

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// a @ b over a stack (bmm), operands rounded to `precision`, result in a's dtype.
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision);

/// beta · c + alpha · (a @ b); c broadcasts to the product's shape (e.g. a (b, b)
/// identity). In FP32 mode this is one baddbmm; in 16-bit modes the sum is taken
/// in the iterate dtype so that the iterates keep full precision.
at::Tensor matmul_add(
    const at::Tensor& c,
    const at::Tensor& a,
    const at::Tensor& b,
    double beta,
    double alpha,
    MatmulPrecision precision);

/// Identity (b, b) with the dtype and device of `like`; broadcasts over a stack.
at::Tensor identity_like(const at::Tensor& like);

}  // namespace dash::linalg
