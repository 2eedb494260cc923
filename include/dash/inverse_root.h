#pragma once

// Batched inverse p-th roots of symmetric positive semi-definite matrices:
// the solver half of DASH (arXiv 2602.02016: eigendecomposition, coupled Newton,
// Newton–Denman–Beavers and Chebyshev roots, scaled by multi-vector power iteration).
//
// Every function takes one matrix (b, b) or a stack (N, b, b) and works on the
// whole stack with batched calls: no loop over N. Results are float32, or
// float64 for float64 input.

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <string>

namespace dash {
namespace linalg {
class Scratch;
}  // namespace linalg
struct Eigenbasis;

/// How the inverse root is computed.
enum class RootMethod {
  EVD,            ///< symmetric eigendecomposition (eigh) + eigenvalue heuristic
  CoupledNewton,  ///< coupled Newton iteration (Guo & Higham 2006)
  NewtonDB,       ///< Newton–Denman–Beavers / coupled Newton–Schulz square roots
  Chebyshev,      ///< Chebyshev interpolant of x^{-1/p}, evaluated with Clenshaw
  /// dash::Dash: per factor stack, the fastest of the four methods above whose roots
  /// are within `auto_max_error` of exact ones, timed at the stack's first root
  /// computation on the device in use (choose_root_method(),
  /// <dash/root_method_choice.h>). inverse_root() itself needs one of the four.
  Auto,
};

/// How EVD repairs the eigenvalues λ of A before inverting them (ε is the options'
/// epsilon). For positive semi-definite A, Shampoo and AbsAdd give (A + εI)^{-1/p}.
enum class EigenHeuristic {
  Shampoo,        ///< λ ← λ − min(min λ, 0) + ε
  Abs,            ///< λ ← |λ|
  AbsAdd,         ///< λ ← |λ| + ε
  PseudoInverse,  ///< λ ≤ ε contributes 0; only λ > ε is inverted
};

/// How the iterative solvers normalise the spectrum into (0, 1].
enum class Scaling {
  Frobenius,            ///< s = ‖A‖_F: cheap, s ≥ λ_max always, but loose for large b
  PowerIteration,       ///< s = margin · λ̂_max from one start vector
  MultiPowerIteration,  ///< s = margin · max over `power_vectors` start vectors
};

/// The step polynomial of NewtonDB. Each step applies E = q(ZY) to its iterates,
/// which maps an eigenvalue x of the normalised square root to x·q(x²).
enum class NewtonDBPolynomial {
  NewtonSchulz,  ///< q(w) = (3 − w)/2 every step, as in the paper (3 matmuls a step)
  Minimax3,      ///< per step the cubic closest to 1 on what is left of [√ℓ, 1] (3 matmuls)
  Minimax5,      ///< the same with quintics (4 matmuls a step, fewer steps)
};

/// Precision of the matmul inputs. In 16-bit modes the operands (and, as on a GPU,
/// the product) are rounded to 16 bits; the iterates themselves stay in float32.
/// NewtonDB in a 16-bit mode regularises the normalised spectrum (A + εI)/s at no
/// less than half the 16-bit unit roundoff (bf16 2⁻⁹, fp16 2⁻¹²): below it the
/// rounding makes eigenvalues negative, which the iteration would amplify until it
/// overflows. Eigenvalues that small are lost to 16-bit rounding in any case.
enum class MatmulPrecision { FP32, FP16, BF16 };

struct InverseRootOptions {
  TORCH_ARG(RootMethod, method) = RootMethod::NewtonDB;
  TORCH_ARG(EigenHeuristic, eigen_heuristic) = EigenHeuristic::Shampoo;
  TORCH_ARG(Scaling, scaling) = Scaling::MultiPowerIteration;
  /// Power-iteration steps.
  TORCH_ARG(int64_t, power_iterations) = 10;
  /// Start vectors of MultiPowerIteration, 1 to 32.
  TORCH_ARG(int64_t, power_vectors) = 16;
  /// s = margin · λ̂_max; power iteration underestimates λ_max, the margin covers it.
  TORCH_ARG(double, power_margin) = 2.0;
  /// Newton steps of CoupledNewton, and of each square-root pass of NewtonDB.
  TORCH_ARG(int64_t, newton_steps) = 10;
  /// 0: always run `newton_steps`. > 0: stop once every matrix's residual
  /// ‖M − I‖_F/√b is ≤ tolerance. Checking it reads one scalar back to the host,
  /// so it is done only every `tolerance_check_interval` steps.
  TORCH_ARG(double, tolerance) = 0.0;
  TORCH_ARG(int64_t, tolerance_check_interval) = 4;
  /// NewtonDB's step polynomial. The minimax ones run at most `newton_steps` per
  /// square-root pass and stop earlier, without a host read, once their design
  /// error bound is a few roundings of the matmul precision (Amsel et al., "The
  /// Polar Express", 2025, applied to the coupled square-root iteration).
  TORCH_ARG(NewtonDBPolynomial, newton_db_polynomial) = NewtonDBPolynomial::NewtonSchulz;
  /// ℓ: the minimax polynomials are made for a normalised spectrum in [ℓ, 1].
  /// Eigenvalues below ℓ·s converge more slowly, and come out regularised (less
  /// than their true inverse root) when the steps run out; a larger ℓ needs fewer steps.
  TORCH_ARG(double, minimax_interval_min) = 1e-6;
  /// Polynomial degree of the Chebyshev method (degree − 1 matmuls).
  TORCH_ARG(int64_t, chebyshev_degree) = 40;
  /// Chebyshev fits x^{-1/p} on [δ, 1] of the normalised spectrum, with
  /// δ = max(epsilon / s, chebyshev_interval_min). Eigenvalues below δ·s are
  /// extrapolated and come out regularised (less than their true inverse root).
  TORCH_ARG(double, chebyshev_interval_min) = 1e-3;
  /// EVD with an Eigenbasis (the optimizer keeps one per factor): a matrix whose
  /// previous eigenvectors Q still give its root to within τ (relative, as
  /// estimated to first order from the off-diagonal part of QᵀAQ) keeps them (its
  /// root costs 3 matmuls instead of an eigh); the others get
  /// `eigen_warm_iterations` QR-algorithm steps from Q, and eigh if still above τ.
  /// 0: eigh every time (no warm start).
  TORCH_ARG(double, eigen_refresh_tolerance) = 0.0;
  /// QR-algorithm steps from the previous eigenvectors before falling back to eigh.
  TORCH_ARG(int64_t, eigen_warm_iterations) = 1;
  /// RootMethod::Auto takes only methods whose roots are within this error of the
  /// exact (A + εI)^{-1/p}, measured on the preconditioned gradient (relative RMS
  /// of X·g over gradients g whose second moment is the factor A; see
  /// choose_root_method()). The default admits the paper's 10-step solvers, whose
  /// roots of real training factors are 0.1–0.4 off in this measure and train as
  /// well as exact ones (docs/results.md); 0.05 leaves only near-exact roots.
  TORCH_ARG(double, auto_max_error) = 0.5;
  /// Regularisation: the root of A + εI is computed.
  TORCH_ARG(double, epsilon) = 1e-10;
  TORCH_ARG(MatmulPrecision, precision) = MatmulPrecision::FP32;
};

/// (A + εI)^{-1/p} for each matrix of A ((b, b) or (N, b, b)).
///
/// p: EVD, CoupledNewton and Chebyshev take any p ≥ 1; NewtonDB takes p = 1 or a
/// power of two (it chains square-root passes).
///
/// Non-finite input: a matrix with a NaN or Inf entry yields an all-NaN root, and
/// `finite` is false for it in inverse_root_with_diagnostics; the other matrices of
/// the stack are unaffected. No error is raised, so a stack never needs a host sync.
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
  std::unique_ptr<linalg::Scratch> scratch_;
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

/// RootMethod::EVD with options.eigen_refresh_tolerance() > 0, warm-started from
/// (and updating) `basis`. Takes a few host read-backs (which matrices need what).
/// With a tolerance of 0 it is inverse_root() plus the basis.
at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options,
    InverseRootWorkspace& workspace, Eigenbasis& basis);

/// Per-matrix quality figures, computed on the device (no host sync).
struct InverseRootResult {
  at::Tensor root;      ///< same as inverse_root()
  at::Tensor residual;  ///< ‖X^p (A + εI) − I‖_F / √b, shape (N,) (or () for 2-D input)
  at::Tensor finite;    ///< bool, shape (N,) (or ()): every entry of the root is finite
};

InverseRootResult inverse_root_with_diagnostics(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options = {});

/// Throws a c10::Error naming the first out-of-range option, or a root p the
/// method cannot compute; inverse_root() runs this check itself.
void check_inverse_root_options(int64_t p, const InverseRootOptions& options);

/// Scale s with s ≥ λ_max(A) (up to the power-iteration estimate) for each matrix,
/// shape (N, 1, 1) (or (1, 1) for 2-D input), by the options' scaling method.
/// Used as-is (epsilon is not added here).
at::Tensor estimate_spectral_scale(const at::Tensor& matrices, const InverseRootOptions& options = {});

// Names, for command lines, config files and reports: to_string() gives the
// canonical one; parse_*() is case-insensitive and rejects an unknown name with
// the list of valid ones (c10::Error).
std::string to_string(RootMethod method);
std::string to_string(EigenHeuristic heuristic);
std::string to_string(Scaling scaling);
std::string to_string(NewtonDBPolynomial polynomial);
std::string to_string(MatmulPrecision precision);
/// "evd", "cn" | "coupled-newton", "ndb" | "newton-db", "chebyshev", "auto".
RootMethod parse_root_method(const std::string& name);
/// "shampoo", "abs", "abs-add", "pseudo-inverse".
EigenHeuristic parse_eigen_heuristic(const std::string& name);
/// "fro" | "frobenius", "pi" | "power-iteration", "multi-pi" | "multi-power-iteration".
Scaling parse_scaling(const std::string& name);
/// "newton-schulz", "minimax3", "minimax5".
NewtonDBPolynomial parse_newton_db_polynomial(const std::string& name);
/// "fp32", "fp16", "bf16".
MatmulPrecision parse_matmul_precision(const std::string& name);

}  // namespace dash
