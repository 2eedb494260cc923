#pragma once

// Batched matmul in a chosen input precision. Results and 16-bit staging come from
// a Scratch (kernels/scratch.h), so an iteration that drops its old iterates
// allocates nothing after its first call.
//
// In 16-bit modes a bmm rounds its operands to the operand type and its result to
// it too, so a product is exact in 16 bits. An iterate that only feeds further
// matmuls (Y, Z and E of Newton–Denman–Beavers, X, M' and N^k of coupled Newton)
// can stay there: `operand_matmul` keeps it in 16 bits, `as_operand` rounds an
// operand once however many matmuls read it. Every cast so saved is a memory pass
// over the stack; on an H200 at b = 1024 one takes about half as long as the
// 16-bit matmul itself, and before the iterates stayed in 16 bits the casts made
// 16-bit roots slower than TF32 ones (docs/benchmarks.md, "GPU: one NVIDIA H200"; docs/experiments/2026-12-04-gpu-h200.md).

#include <dash/inverse_root.h>

#include "kernels/scratch.h"

#include <ATen/core/Tensor.h>

namespace dash::linalg {

/// The dtype matmul operands are rounded to: float16 or bfloat16, or `iterate`
/// itself in FP32 mode.
at::ScalarType operand_dtype(MatmulPrecision precision, at::ScalarType iterate);

/// What a product is known to be. `Symmetric`: a and b are symmetric and commute,
/// as polynomials in one matrix do (every iterate of the Newton and Chebyshev
/// solvers, and their squares), so a @ b is symmetric. In FP32 mode a CPU then
/// computes only its lower triangle, in float32 and float64
/// (stack_symmetric_product, stack_blas.h); elsewhere it is an ordinary bmm. For any other operands the result would be the
/// lower triangle of a @ b mirrored: never pass `Symmetric` for them. Symmetric in
/// exact arithmetic is not enough inside a coupled iteration: a product whose
/// first-order perturbation is not symmetric must stay whole (NDB's Z·Y,
/// newton_denman_beavers.cpp).
enum class Product { General, Symmetric };

/// `t` rounded to the operand dtype, in a buffer of `scratch`; `t` itself when it
/// has that dtype already (FP32 mode, or a product of operand_matmul).
at::Tensor as_operand(const at::Tensor& t, MatmulPrecision precision, kernels::Scratch& scratch);

/// alpha · (a @ b) over a stack, left in the operand dtype (see above). alpha
/// scales the product inside the matmul, before its result is rounded: a scaled
/// product costs no pass of its own.
at::Tensor operand_matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision,
    kernels::Scratch& scratch, double alpha = 1.0, Product product = Product::General);

/// a @ b over a stack, operands rounded to `precision` (unless they are already),
/// result in the iterate dtype: that of the first operand not in 16 bits, float32
/// when both are.
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, MatmulPrecision precision, kernels::Scratch& scratch);

/// c ← beta · c + alpha · (a @ b), in place; c has the product's shape (and is
/// symmetric when `product` is). In FP32 mode this is one in-place product: the
/// split GEMMs of stack_blas.h on a CPU with a pthreads OpenBLAS, else a baddbmm
/// (an out= baddbmm with a broadcast c would allocate an expanded copy of c per
/// call); in 16-bit modes the sum is taken in c's dtype so that the iterates keep
/// full precision. beta = 0 does not read c (NaN or Inf there does not
/// propagate), as in BLAS.
at::Tensor& matmul_add_(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta, double alpha,
    MatmulPrecision precision, kernels::Scratch& scratch, Product product = Product::General);

/// `t` as an input of an element-wise op that computes in `dtype`. CUDA's
/// element-wise kernels widen a 16-bit input as they load it, so there this is `t`
/// itself; ATen's CPU kernels would first copy it into a fresh tensor of `dtype`,
/// so elsewhere the copy is made here, into a buffer of `scratch`. Same arithmetic
/// either way, as long as the op's other inputs are in `dtype` (a plain number
/// does not promote: t · 2.0 stays in 16 bits on CUDA).
at::Tensor widened(const at::Tensor& t, at::ScalarType dtype, kernels::Scratch& scratch);

/// Adds `values` ((b) or (N, b)) to the diagonal of each matrix of t (N, b, b), in
/// place. The sum is taken in `values`' dtype and rounded once to t's: a constant
/// such as Newton's c₀ stays exact even where t is in 16 bits.
void add_to_diagonal(at::Tensor& t, const at::Tensor& values, kernels::Scratch& scratch);

/// `t` converted to `dtype`: `t` itself, or a copy in a buffer of `scratch`, made over
/// the cores (copy_over_cores).
at::Tensor in_dtype(const at::Tensor& t, at::ScalarType dtype, kernels::Scratch& scratch);

/// Unit roundoff u of a floating-point type (float32 for any other type).
double unit_roundoff(at::ScalarType type);

/// The unit roundoff of a precision mode's matmul operands.
double operand_roundoff(MatmulPrecision precision);

/// Identity (b, b) with the dtype and device of `like`; broadcasts over a stack.
at::Tensor identity_like(const at::Tensor& like);

}  // namespace dash::linalg
