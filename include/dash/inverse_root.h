#pragma once

#if defined(DASH_LAYER_KERNELS)
#error "dash layering: <dash/inverse_root.h> belongs to the linalg layer (docs/architecture.md)"
#endif

// Batched inverse p-th roots of symmetric positive semi-definite matrices:
// the solver half of DASH (arXiv 2602.02016: eigendecomposition, coupled Newton,
// Newton–Denman–Beavers and Chebyshev roots, scaled by multi-vector power iteration).
//
// Every function takes one matrix (b, b) or a stack (N, b, b) and works on the
// whole stack with batched calls: no loop over N. Results are float32, or
// float64 for float64 input.

#include <dash/root_options.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace dash {
namespace kernels {
class Scratch;
}  // namespace kernels
struct Eigenbasis;

/// (A + εI)^{-1/p} for each matrix of A ((b, b) or (N, b, b)); with
/// options.relative_epsilon() > 0, ε is max(ε, ε_rel·λ_max) per matrix.
///
/// p: EVD, CoupledNewton and Chebyshev take any p ≥ 1; NewtonDB takes p = 1 or a
/// power of two (it chains square-root passes).
///
/// Non-finite input: a matrix with a NaN or Inf entry yields an all-NaN root, and
/// `finite` is false for it in inverse_root_with_diagnostics; the other matrices of
/// the stack are unaffected. No error is raised, so a stack never needs a host sync.
///
/// EVD on a CPU with a pthreads OpenBLAS splits the stack into one range per
/// OpenBLAS thread, each solved single-threaded, and two such calls in different
/// threads run one after the other.
at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options = {});

/// Memory that inverse_root() reuses from one call to the next: the iterative
/// solvers' stack-sized temporaries (a few (N, b, b) tensors) and 16-bit staging.
/// With a workspace that lives across calls, an iteration allocates nothing once
/// the workspace holds buffers for the largest stack it has seen; without one,
/// every call allocates them afresh. Not thread-safe: one workspace per thread. A
/// moved-from workspace holds nothing and is rejected by inverse_root().
class InverseRootWorkspace {
 public:
  InverseRootWorkspace();
  ~InverseRootWorkspace();
  InverseRootWorkspace(InverseRootWorkspace&&) noexcept;
  InverseRootWorkspace& operator=(InverseRootWorkspace&&) noexcept;

  /// Bytes held for reuse.
  int64_t bytes() const;

 private:
  friend at::Tensor inverse_root(const at::Tensor&, int64_t, const InverseRootOptions&, InverseRootWorkspace&);
  friend at::Tensor inverse_root(
      const at::Tensor&, int64_t, const InverseRootOptions&, InverseRootWorkspace&, Eigenbasis&);
  std::unique_ptr<kernels::Scratch> scratch_;
};

/// inverse_root() with its temporaries from `workspace`. The returned root may
/// live in the workspace's memory: it is never handed out again while any tensor
/// refers to it, and becomes reusable once the caller drops it.
at::Tensor inverse_root(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, InverseRootWorkspace& workspace);

/// Eigenvectors kept from one EVD root computation to the next, for matrices that
/// change little in between (a Shampoo factor between two root steps): the warm
/// start of Distributed Shampoo's QR eigendecomposition, plus its adaptive refresh.
/// inverse_root(..., basis) reads the previous basis and replaces the tensors.
struct Eigenbasis {
  at::Tensor vectors;  ///< (N, b, b): columns are eigenvectors; undefined: none yet
  at::Tensor valid;    ///< (N,) bool: which matrices' vectors hold a basis
  /// (N,) int64, what the last call did per matrix: 0 basis kept (within the
  /// tolerance), 1 warm-started (QR steps), 2 eigh from scratch.
  at::Tensor status;
};

/// RootMethod::EVD with options.eigen().refresh_tolerance() > 0, warm-started from
/// (and updating) `basis`. Takes a few host read-backs (which matrices need what).
/// With a tolerance of 0 it is inverse_root() plus the basis.
at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options,
    InverseRootWorkspace& workspace, Eigenbasis& basis);

/// Per-matrix quality figures, computed on the device (no host sync).
struct InverseRootResult {
  at::Tensor root;  ///< same as inverse_root()
  /// ‖X^p (A + ε_eff I) − I‖_F / √b with ε_eff = max(ε, ε_rel·λ_max), the matrix the
  /// root was asked for (InverseRootOptions::relative_epsilon), for every method,
  /// also where ε acts on eigenvalues (EVD, NewtonDB by eigh); shape (N,) (or () for
  /// 2-D input).
  at::Tensor residual;
  at::Tensor finite;  ///< bool, shape (N,) (or ()): every entry of the root is finite
};

InverseRootResult inverse_root_with_diagnostics(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options = {});

/// Scale s with s ≥ λ_max(A) (up to the power-iteration estimate) for each matrix,
/// shape (N, 1, 1) (or (1, 1) for 2-D input), as the iterative solvers compute it
/// (power iteration's products in `precision`). Used as-is (no epsilon is added).
at::Tensor estimate_spectral_scale(const at::Tensor& matrices, const SpectralScaleOptions& options = {},
    MatmulPrecision precision = MatmulPrecision::FP32);

}  // namespace dash
