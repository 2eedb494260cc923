#pragma once

#if defined(DASH_LAYER_KERNELS)
#error "dash layering: <dash/root_options.h> belongs to the linalg layer (docs/architecture.md)"
#endif

// What the inverse-root solvers take (<dash/inverse_root.h>): one small options
// struct per solver and one for the spectral scaling, composed by
// InverseRootOptions, the way Distributed Shampoo's matrix_functions_types.py
// gives each root method its own config. A solver reads only its own struct
// (plus the matmul precision and ε, which all share).
//
//   auto options = dash::InverseRootOptions().method(dash::RootMethod::CoupledNewton);
//   options.newton().steps(5).tolerance(1e-3);
//   options.scaling().method(dash::Scaling::PowerIteration);
//
// Python's dash.Dash and dash.inverse_root take the same options as flat keywords
// (newton_steps, power_vectors, ...; docs/python.md lists the mapping).

#include <c10/core/Device.h>
#include <torch/arg.h>

#include <cstdint>
#include <string>

namespace dash {

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

/// The four solvers (every RootMethod but Auto): the one list RootMethod::Auto
/// compares and the tests and benchmarks iterate.
inline constexpr RootMethod kSolverMethods[] = {
    RootMethod::EVD, RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev};

/// What sets a solver apart, for code that treats solvers alike except in these
/// respects (a benchmark's sweep, a test's tolerance) and so filters kSolverMethods
/// instead of listing methods of its own. A new solver answers here (the switch
/// has no default, so the compiler names a method left out).
struct SolverTraits {
  /// Roots by matrix products alone, from a spectral scale (SpectralScaleOptions
  /// applies); false for a factorisation (EVD).
  bool matmul_only = false;
  /// A Newton iteration: NewtonOptions' step count and tolerance apply.
  bool newton_iteration = false;
  /// A polynomial of fixed degree: its error is its approximation's on the
  /// interval, not the iteration's convergence to rounding.
  bool fixed_degree = false;
};

constexpr SolverTraits solver_traits(RootMethod method) {
  switch (method) {
    case RootMethod::EVD:
    case RootMethod::Auto:
      return {};
    case RootMethod::CoupledNewton:
    case RootMethod::NewtonDB:
      return {true, true, false};
    case RootMethod::Chebyshev:
      return {true, false, true};
  }
  return {};
}

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
  MultiPowerIteration,  ///< s = margin · max over `vectors` start vectors
};

/// The step polynomial of NewtonDB. Each step applies E = q(ZY) to its iterates,
/// which maps an eigenvalue x of the normalised square root to x·q(x²).
enum class NewtonDBPolynomial {
  NewtonSchulz,  ///< q(w) = (3 − w)/2 every step, as in the paper (3 matmuls a step)
  Minimax3,      ///< per step the cubic closest to 1 on what is left of [√ℓ, 1] (3 matmuls)
  Minimax5,      ///< the same with quintics (4 matmuls a step, fewer steps)
};

/// How NewtonDB's root is evaluated. Every iterate of NewtonDB is a polynomial in the
/// normalised stack, so its result is a function φ of the eigenvalues: the root
/// Q·diag(φ(λ))·Qᵀ. Eigh evaluates φ exactly (float64 scalar recurrences, the same
/// steps, regularisation floors and tolerance checks), so it differs from the matrix
/// iteration by that iteration's rounding (in 16-bit modes, its 16-bit products) and by
/// the spectral scale: margin·λ_max from the eigenvalues instead of power iteration's
/// estimate. φ is not λ^{-1/p}: a fixed number of steps leaves the small eigenvalues
/// under-resolved ("NewtonDB's root as a function of the eigenvalues", docs/experiments/2026-12-05-ndb-by-eigh.md).
enum class NewtonDBEvaluation {
  Matmuls,  ///< the coupled iteration on the matrices (the paper's; matmuls only)
  Eigh,     ///< one eigh, then the scalar iteration on the eigenvalues: NewtonDB's
            ///< root at EVD's cost, for devices where eigh is cheaper than the matmuls
  Auto,     ///< by a fixed rule from the device and the precision:
            ///< resolve_newton_db_evaluation()
};

/// Precision of the matmul inputs. In 16-bit modes the operands (and, as on a GPU,
/// the product) are rounded to 16 bits; the iterates themselves stay in float32.
/// NewtonDB in a 16-bit mode regularises the normalised spectrum (A + εI)/s at no
/// less than half the 16-bit unit roundoff (bf16 2⁻⁹, fp16 2⁻¹²): below it the
/// rounding makes eigenvalues negative, which the iteration would amplify until it
/// overflows. Eigenvalues that small are lost to 16-bit rounding in any case.
enum class MatmulPrecision { FP32, FP16, BF16 };

/// RootMethod::EVD.
struct EigenOptions {
  TORCH_ARG(EigenHeuristic, heuristic) = EigenHeuristic::Shampoo;
  /// With an Eigenbasis (the optimizer keeps one per factor): a matrix whose
  /// previous eigenvectors Q still give its root to within τ (relative, as
  /// estimated to first order from the off-diagonal part of QᵀAQ) keeps them (its
  /// root costs 3 matmuls instead of an eigh); the others get `warm_iterations`
  /// QR-algorithm steps from Q, and eigh if still above τ. 0: eigh every time.
  TORCH_ARG(double, refresh_tolerance) = 0.0;
  /// QR-algorithm steps from the previous eigenvectors before falling back to eigh.
  TORCH_ARG(int64_t, warm_iterations) = 1;
};

/// The Newton-type iterations: CoupledNewton, and each square-root pass of NewtonDB.
struct NewtonOptions {
  TORCH_ARG(int64_t, steps) = 10;
  /// 0: always run `steps`. > 0: stop once every matrix's residual ‖M − I‖_F/√b is
  /// ≤ tolerance. Checking it reads one scalar back to the host, so it is done
  /// only every `check_interval` steps.
  TORCH_ARG(double, tolerance) = 0.0;
  TORCH_ARG(int64_t, check_interval) = 4;
};

/// RootMethod::NewtonDB's step polynomials (its step count is NewtonOptions'). The
/// minimax ones run at most `steps` per square-root pass and stop earlier, without
/// a host read, once their design error bound is a few roundings of the matmul
/// precision (Amsel et al., "The Polar Express", 2025, applied to the coupled
/// square-root iteration).
struct NewtonDBOptions {
  TORCH_ARG(NewtonDBPolynomial, polynomial) = NewtonDBPolynomial::NewtonSchulz;
  /// ℓ: the minimax polynomials are made for a normalised spectrum in [ℓ, 1].
  /// Eigenvalues below ℓ·s converge more slowly, and come out regularised (less
  /// than their true inverse root) when the steps run out; a larger ℓ needs fewer steps.
  TORCH_ARG(double, interval_min) = 1e-6;
  /// Matmuls (the iteration itself), Eigh (its function of the eigenvalues), or Auto.
  TORCH_ARG(NewtonDBEvaluation, evaluation) = NewtonDBEvaluation::Auto;
};

/// RootMethod::Chebyshev.
struct ChebyshevOptions {
  /// Polynomial degree (degree − 1 matmuls).
  TORCH_ARG(int64_t, degree) = 40;
  /// The interpolant fits x^{-1/p} on [δ, 1] of the normalised spectrum, with
  /// δ = max(epsilon / s, interval_min). Eigenvalues below δ·s are extrapolated
  /// and come out regularised (less than their true inverse root).
  TORCH_ARG(double, interval_min) = 1e-3;
};

/// The scale s ≥ λ_max that puts the spectrum of the iterative solvers into (0, 1]
/// (EVD needs none).
struct SpectralScaleOptions {
  TORCH_ARG(Scaling, method) = Scaling::MultiPowerIteration;
  /// Power-iteration steps.
  TORCH_ARG(int64_t, iterations) = 10;
  /// Start vectors of MultiPowerIteration, 1 to 32.
  TORCH_ARG(int64_t, vectors) = 16;
  /// s = margin · λ̂_max; power iteration underestimates λ_max, the margin covers it.
  TORCH_ARG(double, margin) = 2.0;
};

struct InverseRootOptions {
  TORCH_ARG(RootMethod, method) = RootMethod::NewtonDB;
  TORCH_ARG(EigenOptions, eigen) = {};
  TORCH_ARG(NewtonOptions, newton) = {};
  TORCH_ARG(NewtonDBOptions, newton_db) = {};
  TORCH_ARG(ChebyshevOptions, chebyshev) = {};
  TORCH_ARG(SpectralScaleOptions, scaling) = {};
  /// RootMethod::Auto takes only methods whose roots are within this error of the
  /// exact (A + εI)^{-1/p}, measured on the preconditioned gradient (relative RMS
  /// of X·g over gradients g whose second moment is the factor A; see
  /// choose_root_method()). The default admits the paper's 10-step solvers, whose
  /// roots of real training factors are 0.1–0.4 off in this measure and train as
  /// well as exact ones (docs/results.md); 0.05 leaves only near-exact roots.
  TORCH_ARG(double, auto_max_error) = 0.5;
  /// Regularisation: the root of A + εI is computed.
  TORCH_ARG(double, epsilon) = 1e-10;
  /// Regularisation relative to the largest eigenvalue: the root of
  /// A + max(ε, ε_rel·λ_max)·I, the ridge of Google's Scalable Shampoo (Anil et al.,
  /// 2020). It bounds each root's condition number by about ε_rel^{-1/p} whatever
  /// the factor's scale. λ_max is EVD's largest eigenvalue, or the iterative
  /// solvers' estimate (s / margin with power-iteration scaling, s = ‖A‖_F with
  /// Frobenius). EVD treats the sum like ε: added by the Shampoo and AbsAdd
  /// heuristics, the cutoff of PseudoInverse, ignored by Abs. 0: off.
  TORCH_ARG(double, relative_epsilon) = 0.0;
  TORCH_ARG(MatmulPrecision, precision) = MatmulPrecision::FP32;
};

// Each throws a c10::Error naming the first out-of-range option; the names are the
// flat ones that dash.Dash and checkpoints use, with the C++ path next to them.
void check_solver_options(const EigenOptions& options);
void check_solver_options(const NewtonOptions& options);
void check_solver_options(const NewtonDBOptions& options);
void check_solver_options(const ChebyshevOptions& options);
void check_solver_options(const SpectralScaleOptions& options);
/// All of the above, ε, auto_max_error, and the root p the method must be able to
/// compute; inverse_root() runs this check itself.
void check_inverse_root_options(int64_t p, const InverseRootOptions& options);

/// The evaluation NewtonDB runs for matrices on `device`: Matmuls or Eigh as set, and
/// for NewtonDBEvaluation::Auto Eigh on a CPU in FP32 precision, Matmuls elsewhere.
/// A rule, not a timing, so that the same options give the same roots on every run.
/// Why: on a CPU one eigh per factor costs less than the iteration's ~50 matmuls; on a
/// GPU the batched eigh is the slower one (measurements: docs/results.md, "NewtonDB by
/// eigh"; docs/experiments/2026-12-05-ndb-by-eigh.md). A 16-bit precision asks for 16-bit matmuls, which eigh
/// would not run. Other devices (MPS, XPU) get Matmuls, unmeasured.
NewtonDBEvaluation resolve_newton_db_evaluation(const InverseRootOptions& options, const c10::Device& device);

// Names, for command lines, config files and reports: to_string() gives the
// canonical one; parse_*() is case-insensitive and rejects an unknown name with
// the list of valid ones (c10::Error).
std::string to_string(RootMethod method);
std::string to_string(EigenHeuristic heuristic);
std::string to_string(Scaling scaling);
std::string to_string(NewtonDBPolynomial polynomial);
std::string to_string(NewtonDBEvaluation evaluation);
std::string to_string(MatmulPrecision precision);
/// "evd", "cn" | "coupled-newton", "ndb" | "newton-db", "chebyshev", "auto".
RootMethod parse_root_method(const std::string& name);
/// "shampoo", "abs", "abs-add", "pseudo-inverse".
EigenHeuristic parse_eigen_heuristic(const std::string& name);
/// "fro" | "frobenius", "pi" | "power-iteration", "multi-pi" | "multi-power-iteration".
Scaling parse_scaling(const std::string& name);
/// "newton-schulz", "minimax3", "minimax5".
NewtonDBPolynomial parse_newton_db_polynomial(const std::string& name);
/// "matmuls", "eigh", "auto".
NewtonDBEvaluation parse_newton_db_evaluation(const std::string& name);
/// "fp32", "fp16", "bf16".
MatmulPrecision parse_matmul_precision(const std::string& name);

}  // namespace dash
