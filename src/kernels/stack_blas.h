#pragma once

// BLAS over a CPU stack, split like LAPACK (core_ranges.h: one range of matrices
// per core, each with a single-threaded OpenBLAS), and the symmetric products that
// need only one triangle of their result.
//
// Shampoo's matrices are symmetric: a factor, G Gᵀ, and every iterate of the
// Newton and Chebyshev solvers (a polynomial in one factor). BLAS computes half of
// such a product with syrk (A Aᵀ) or with GEMMs on column panels of the lower
// triangle (A B for commuting symmetric A and B), and the mirror copies it into the
// other half while the matrix is in cache. On a GPU (cuBLAS has neither a batched
// syrk nor a batched triangular GEMM) and with other BLAS libraries the callers
// keep one batched GEMM per stack.

#include <ATen/core/Tensor.h>

#include <string>

namespace dash::kernels {

/// out = a @ b for (N, m, k) and (N, k, n) stacks. On a CPU whose OpenBLAS the
/// split controls, and a stack of at least as many matrices as BLAS threads, one
/// range per thread with a single-threaded BLAS: as fast as OpenBLAS's own
/// threads, and it leaves no OpenBLAS worker spinning afterwards. (A worker spins
/// for a while after each multi-threaded call and takes a core from the next split,
/// which then runs much slower: docs/experiments/2026-12-03-step-floor.md, "Factor updates with
/// syrk".) Otherwise, and for work too small to split, one at::bmm_out.
///
/// 16-bit stacks split the same way when ATen's own pool has a single thread
/// (Debian's LibTorch): LibTorch multiplies them with oneDNN on that pool, so one call
/// would use one core of several.
/// A wider pool keeps one call, which uses it. `alpha` scales the product inside
/// the matmul (beta = 0: out is not read).
at::Tensor& stack_bmm_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha = 1.0);

/// out = alpha · a @ b in one call (at::bmm_out, or a β = 0 baddbmm_); what out
/// held is never read, not even where LibTorch's CPU loop for tiny products would.
void bmm_out_scaled(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha);

/// Whether stack_gemm() takes `c`, `a` and `b`: (N, m, n), (N, m, k) and (N, k, n)
/// CPU stacks of one dtype (float32 or float64) with unit column stride, C's
/// matrices apart and apart from A's and B's, and a pthreads OpenBLAS that exports
/// cblas_sgemm/dgemm.
bool stack_gemm_supported(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

/// C ← β C + α A B for every matrix of the stacks: one single-threaded GEMM per
/// block of up to 128 rows of C, the blocks split over the cores by
/// for_each_range(). β = 0 ignores what C held. As for stack_symmetric_product(), a
/// matrix's result does not depend on its stack or the thread count, a stack of
/// one still uses every core, and no OpenBLAS worker is left spinning to slow the
/// next split (stack_bmm_out()). Requires stack_gemm_supported(c, a, b).
void stack_gemm(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta);

/// Whether stack_syrk() takes `c` and `a` (else the caller multiplies): CPU float32
/// or float64 stacks of one dtype, matrices with unit column stride, and a pthreads
/// OpenBLAS that exports cblas_ssyrk/cblas_dsyrk (as stack_lapack_plan() requires of
/// the split; other BLAS libraries keep their own batched GEMM, unmeasured here).
bool stack_syrk_supported(const at::Tensor& c, const at::Tensor& a);

/// C ← β C + α A Aᵀ (or α Aᵀ A with `transpose_a`) for every matrix of the stacks,
/// through for_each_stack_range(): BLAS syrk computes the lower triangle (half a
/// GEMM's multiply-adds), which is then mirrored into the upper one while the
/// matrix is in cache, so C stays exactly symmetric. β = 0 ignores what C held.
/// Every matrix gets a single-threaded syrk, a stack of one included, so that its
/// result does not depend on the stack it is in (as for eigh); one 256² syrk runs
/// about as fast on one core as a GEMM of the same product on two. Splits more
/// often than eigh does (two to four times per stack and step with stack_bmm_out),
/// and so sets the process's OpenBLAS to one thread that often.
/// Requires stack_syrk_supported(c, a).
void stack_syrk(const at::Tensor& c, const at::Tensor& a, bool transpose_a, double alpha, double beta);

/// Whether stack_symmetric_product() takes `c`, `a` and `b`: (N, n, n) CPU stacks of
/// one dtype (float32 or float64) with unit column stride, C's matrices apart and
/// apart from A's and B's, and a pthreads OpenBLAS that exports cblas_sgemm/dgemm.
bool stack_symmetric_product_supported(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b);

/// C ← β C + α A B where every A B is symmetric: A and B symmetric and commuting,
/// as polynomials in one matrix are (the iterates of Newton–Denman–Beavers, coupled
/// Newton and Clenshaw's recurrence). Only the lower triangle is computed, one GEMM
/// per panel of w columns (n/8 rounded up to a multiple of 16, clamped to 32…128),
/// C[j:, j:j+w] = A[j:, :] B[:, j:j+w], and each panel's rows of the upper triangle
/// are mirrored from it: (n + w)/(2n) of a GEMM's multiply-adds where w divides n
/// (0.5625 at n = 256), and C exactly symmetric. β reads C's lower
/// triangle only (C is taken to be symmetric); β = 0 ignores what C held. If A B is
/// not symmetric, C is its lower triangle mirrored.
///
/// The work items are (matrix, panel) pairs, each a single-threaded GEMM, split
/// over the cores by for_each_range(): a matrix's result does not depend on the
/// stack it is in or on the thread count, and a stack of fewer matrices than cores
/// still uses them all. Requires stack_symmetric_product_supported(c, a, b).
void stack_symmetric_product(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta);

/// FLOPs of one n × n product by stack_symmetric_product(), 2 · Σ over its panels
/// of (n − j) · w · n (a GEMM's are 2n³).
double symmetric_product_flops(int64_t n);

/// Whether symmetric results on `device` are computed one triangle at a time
/// (syrk for the factor updates, stack_symmetric_product() for the solvers), or by
/// one batched GEMM per stack, and why, in words. For float32 stacks.
struct TrianglePlan {
  bool one_triangle = false;
  std::string description;
};
TrianglePlan stack_syrk_plan(const at::Device& device);
TrianglePlan stack_symmetric_product_plan(const at::Device& device);

}  // namespace dash::kernels
