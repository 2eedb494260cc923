#pragma once

// Batched matmul in a chosen input precision, with results in the iterate dtype.
// Results and 16-bit staging come from a Scratch (linalg/scratch.h), so an
// iteration that drops its old iterates allocates nothing after its first call.

#include <dash/inverse_root.h>

#include "linalg/scratch.h"

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// a @ b over a stack (bmm), operands rounded to `precision`, result in a's dtype,
/// in a buffer of `scratch`.
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision, Scratch& scratch);

/// c ← beta · c + alpha · (a @ b), in place; c has the product's shape. In FP32
/// mode this is one in-place baddbmm (an out= baddbmm with a broadcast c would
/// allocate an expanded copy of c per call); in 16-bit modes the sum is taken in
/// the iterate dtype so that the iterates keep full precision. beta = 0 does not
/// read c (NaN or Inf there does not propagate), as in BLAS.
at::Tensor& matmul_add_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta, double alpha,
    MatmulPrecision precision, Scratch& scratch);

/// Unit roundoff u of a floating-point type (float32 for any other type).
double unit_roundoff(at::ScalarType type);

/// The unit roundoff of a precision mode's matmul operands.
double operand_roundoff(MatmulPrecision precision);

/// Identity (b, b) with the dtype and device of `like`; broadcasts over a stack.
at::Tensor identity_like(const at::Tensor& like);

}  // namespace dash::linalg
