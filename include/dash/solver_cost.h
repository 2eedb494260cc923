#pragma once

#if defined(DASH_LAYER_KERNELS)
#error "dash layering: <dash/solver_cost.h> belongs to the linalg layer (docs/architecture.md)"
#endif

// Floating-point operation counts of the inverse-root solvers, from the shapes and
// options alone (what a benchmark divides its time by), and the memory their
// temporaries take (what a caller who bounds its memory divides its budget by).

#include <dash/inverse_root.h>

#include <cstdint>

namespace dash {

/// FLOPs of inverse_root() on a stack of `count` (b × b) matrices, counting
/// matmuls at 2·m·n·k; elementwise work is left out. EVD uses the textbook
/// 9·b³ for a symmetric eigendecomposition with vectors, plus the reconstruction.
/// Iterative solvers count their fixed steps (an early stop does fewer). NewtonDB
/// counts as its matmul iteration unless its evaluation is Eigh (Auto is resolved by
/// the overload below, which knows the device).
double inverse_root_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options = {});

/// The FLOPs inverse_root() runs on `device`: as above, except where that device
/// computes one triangle of a symmetric product. On a CPU with a pthreads OpenBLAS,
/// in FP32 precision, the matmuls of coupled Newton and Chebyshev and NewtonDB's
/// Y·E and E·Z (not its Z·Y) are products of two polynomials in the same matrix,
/// run as GEMMs on column panels of the lower triangle ((b + w)/(2b) of a GEMM
/// where w divides b; w = b/8 rounded up to a multiple of 16, clamped to 32…128),
/// and EVD's Q diag Qᵀ is a syrk (b²(b + 1)). NewtonDB counts as it runs on that
/// device (resolve_newton_db_evaluation()). A
/// benchmark divides by this to compare its time with the matmul ceiling.
double inverse_root_flops(
    int64_t count, int64_t b, int64_t p, const InverseRootOptions& options, const at::Device& device);

/// Bytes of temporaries inverse_root() holds at once on `count` (b × b) float32
/// matrices on `device` with an InverseRootWorkspace that starts empty: the
/// workspace's buffers and the stack-sized tensors its operations allocate
/// besides, returned root included. An upper bound per method and precision, set
/// from measurements (test_solver_cost compares it with the allocator's peak for
/// every method and precision); `warm_basis`: EVD given an Eigenbasis. Linear in
/// `count`, plus a few b × b matrices per call.
int64_t inverse_root_workspace_bytes(
    int64_t count, int64_t b, const InverseRootOptions& options, const at::Device& device, bool warm_basis = false);

}  // namespace dash
