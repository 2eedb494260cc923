// inverse_root(): input checks, regularisation, scaling, dispatch to a solver and
// the undoing of the scaling (spec §5). The solvers themselves see only a
// normalised stack (solvers.h).

#include <dash/inverse_root.h>

#include "linalg/batched_matmul.h"
#include "linalg/matrix_checks.h"
#include "kernels/scratch.h"
#include "linalg/solvers.h"
#include "kernels/stack_lapack.h"
#include "kernels/stack_reductions.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace dash {

namespace {

// Float32 for every 16- and 32-bit input; float64 stays float64.
at::ScalarType work_type(const at::Tensor& matrices) {
  return matrices.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

struct Solution {
  at::Tensor root;             // (N, b, b), in input units
  at::Tensor normalized;       // kept: Â = (A + ε_eff I)/s, ε_eff = max(ε, ε_rel·λ_max), the matrix
                               // whose root was asked for (without the 16-bit floor)
  at::Tensor normalized_root;  // Â^{-1/p} (the root itself when not kept)
};

// Raises the regularisation ε/s (N, 1, 1) that the diagonal of `normalized` holds
// to at least `floor`, per matrix; returns the raised ε/s.
at::Tensor raise_regularisation(at::Tensor& normalized, const at::Tensor& epsilon, double floor) {
  normalized.diagonal(0, -2, -1).add_((floor - epsilon).clamp_min(0.0).view({-1, 1}));
  return epsilon.clamp_min(floor);
}

// 16-bit matmuls round the normalised spectrum (top ≤ 1) by about u₁₆, so NewtonDB's
// first products turn eigenvalues below that negative, and its step m ← m(3 − m)²/4
// on the product ZY grows a negative eigenvalue by 9/4 until it overflows. Raising
// the regularisation ε/s of `normalized` to at least u₁₆/2 keeps them positive; what
// lies below was lost to the rounding of Â anyway ("The 16-bit floor",
// docs/benchmarks.md). Float32 is left as it is.
void raise_to_sixteen_bit_floor(at::Tensor& normalized, const at::Tensor& epsilon, MatmulPrecision precision) {
  if (precision == MatmulPrecision::FP32) return;
  raise_regularisation(normalized, epsilon, 0.5 * linalg::operand_roundoff(precision));
}

// NewtonDB evaluated on the eigenvalues from one eigh (NewtonDBEvaluation::Eigh, or
// Auto where it resolves to Eigh).
bool newton_db_by_eigh(const InverseRootOptions& options, const at::Device& device) {
  return options.method() == RootMethod::NewtonDB &&
         resolve_newton_db_evaluation(options, device) == NewtonDBEvaluation::Eigh;
}

// ε_rel·λ_max in normalised units for the iterative solvers: their scale s is
// margin·λ̂_max under power-iteration scaling and ‖A‖_F (taken as λ_max) under Frobenius.
double relative_floor(const InverseRootOptions& options) {
  const auto& scaling = options.scaling();
  return options.relative_epsilon() / (scaling.method() == Scaling::Frobenius ? 1.0 : scaling.margin());
}

// EVD's ε/s with its relative part, max(ε/s, ε_rel·λ_max/s), from the eigenvalues (N, b).
at::Tensor eigen_regularisation(const at::Tensor& epsilon, const at::Tensor& values, double relative_epsilon) {
  if (relative_epsilon <= 0.0) return epsilon;
  return at::maximum(epsilon, values.amax(/*dim=*/1, /*keepdim=*/true).unsqueeze(-1).mul_(relative_epsilon));
}

// Â^{-1/p} by the chosen method. NewtonDB reuses its input's buffer once it has
// read it, so it gets a copy when the caller still needs Â afterwards (the
// diagnostics measure the root against Â as asked for, without the 16-bit floor).
// The methods that regularise eigenvalues rather than `normalized` (EVD: all of
// ε_eff/s; NewtonDB by eigh: the relative part beyond ε/s) set `eigen_ridge`
// (N, 1, 1) to what they added, so that the diagnostics can add it to Â.
at::Tensor normalized_root(at::Tensor normalized, const at::Tensor& epsilon, int64_t p,
    const InverseRootOptions& options, bool keep_normalized, Eigenbasis* basis, kernels::Scratch& scratch,
    at::Tensor& eigen_ridge) {
  switch (options.method()) {
    case RootMethod::EVD: {
      at::Tensor values;
      at::Tensor vectors;
      at::Tensor scaled;  // the eigenvectors scaled to S = Q diag(√f): Q's own buffer unless Q is kept
      if (basis != nullptr) {
        // Eigenvectors do not depend on the scale s, so the basis carries over
        // between computations whatever s each one had.
        values = linalg::refresh_eigenbasis(normalized, epsilon, p, options.eigen(), *basis);
        vectors = basis->vectors;
        scaled = scratch.empty_like(vectors);
      } else {
        // LAPACK writes column-major eigenvectors in place (stack_lapack.h).
        vectors = kernels::column_major_view(scratch.empty_like(normalized));
        values = linalg::batched_eigh(normalized, vectors);
        scaled = vectors;
      }
      eigen_ridge = eigen_regularisation(epsilon, values, options.relative_epsilon());
      return linalg::root_from_eigenbasis(values, vectors, eigen_ridge, p, options.eigen().heuristic(),
          options.precision(), std::move(scaled), scratch);
    }
    case RootMethod::CoupledNewton:
      return linalg::coupled_newton_root(normalized, p, options.newton(), options.precision(), scratch);
    case RootMethod::NewtonDB:
      if (newton_db_by_eigh(options, normalized.device())) {
        auto vectors = kernels::column_major_view(scratch.empty_like(normalized));
        const auto values = linalg::batched_eigh(normalized, vectors);
        auto function_values = linalg::newton_db_eigenvalue_root(values, epsilon, p, options.newton(),
            options.newton_db(), options.scaling(), options.precision(), relative_floor(options), &eigen_ridge);
        return linalg::root_from_eigenvalue_function(
            std::move(function_values), vectors, options.precision(), vectors, scratch);
      }
      if (keep_normalized) normalized = scratch.empty_like(normalized).copy_(normalized);
      raise_to_sixteen_bit_floor(normalized, epsilon, options.precision());
      return linalg::newton_db_root(
          std::move(normalized), p, options.newton(), options.newton_db(), options.precision(), scratch);
    case RootMethod::Chebyshev:
      return linalg::chebyshev_root(normalized, epsilon, p, options.chebyshev(), options.precision(), scratch);
    case RootMethod::Auto:
      break;  // with_stack() rejects it
  }
  TORCH_CHECK(false, "dash::inverse_root: unknown root method");
}

// A stack made ready for a solver: Â = (A + ε I)/s (ε on the diagonal for the
// matmul-only solvers only), the scale s, the effective ε/s, and which matrices
// are admissible (the others were replaced by I).
struct NormalizedStack {
  at::Tensor matrices;
  at::Tensor admissible;
  at::Tensor scale;
  at::Tensor epsilon;
};

NormalizedStack normalize(const at::Tensor& a, const InverseRootOptions& options, kernels::Scratch& scratch) {
  // A matrix with a NaN/Inf entry, a non-symmetric one, or (for the matmul-only
  // solvers, which assume A ⪰ 0) one with a negative diagonal entry is solved as I
  // (so that no solver, nor eigh, sees it and the rest of the stack is
  // unaffected) and its root set to NaN: a failure the caller sees, not a root.
  // EVD's heuristics are meant for indefinite input, so EVD takes those.
  // EVD applies ε inside its eigenvalue heuristic (as Distributed Shampoo does);
  // the matmul-only solvers get it on the diagonal.
  const bool evd = options.method() == RootMethod::EVD;
  auto admitted = kernels::admit_matrices(a, /*positive_diagonal=*/!evd,
      /*diagonal_shift=*/options.epsilon() > 0.0 && !evd ? options.epsilon() : 0.0, scratch);
  auto normalized = std::move(admitted.matrices);
  auto admissible = std::move(admitted.admissible);

  // Solutions from eigenvalues need no spectral bound, only a scale that keeps
  // entries near 1 (NewtonDB's scale then comes from the eigenvalues themselves).
  const bool from_eigenvalues = evd || newton_db_by_eigh(options, a.device());
  auto scale = from_eigenvalues ? admitted.magnitude
                                : linalg::spectral_scale(
                                      normalized, options.scaling(), options.precision(), scratch, admitted.magnitude);
  // With ε added, λ_max ≥ ε; the floor only matters for an all-zero block at ε = 0.
  scale = scale.clamp_min(std::max(options.epsilon(), static_cast<double>(std::numeric_limits<float>::min())));
  // A scale beyond the float range (entries near FLT_MAX / (margin · b)) would
  // turn the root into exact zeros that look finite: a failure instead.
  admissible.logical_and_(at::isfinite(scale));
  normalized.div_(scale);
  auto epsilon = options.epsilon() / scale;
  // For factors above ~1e28 (at ε = 1e-10) ε/s would underflow to 0 and EVD would
  // invert a zero eigenvalue: the regularisation stays at least the smallest normal
  // number of the work type.
  if (options.epsilon() > 0.0) {
    epsilon =
        epsilon.clamp_min(a.scalar_type() == at::kDouble ? std::numeric_limits<double>::min()
                                                         : static_cast<double>(std::numeric_limits<float>::min()));
  }
  // The relative regularisation, once the scale is known (EVD applies it to its
  // eigenvalues, normalized_root()). The ridge can lift the top of the spectrum
  // above 1 (Frobenius scaling of a rank-1 factor has it at 1 already), so the
  // scale grows with it: (Â + δI)/(1 + δ) stays in (0, 1].
  if (options.relative_epsilon() > 0.0 && !from_eigenvalues) {
    const double floor = relative_floor(options);
    epsilon = raise_regularisation(normalized, epsilon, floor).div_(1.0 + floor);
    normalized.div_(1.0 + floor);
    scale = scale * (1.0 + floor);
  }
  return {std::move(normalized), std::move(admissible), std::move(scale), std::move(epsilon)};
}

// `keep_normalized_root`: the diagnostics need Â and Â^{-1/p} after the root is
// formed; otherwise the root is scaled in place and Â's buffer is released early.
// Stack-sized temporaries come from `scratch`: a stack of 600 blocks of 256² is
// 157 MB per tensor.
Solution solve(const at::Tensor& stack, int64_t p, const InverseRootOptions& options, bool keep_normalized_root,
    kernels::Scratch& scratch, Eigenbasis* basis = nullptr) {
  auto [normalized, admissible, scale, epsilon] = normalize(stack.to(work_type(stack)), options, scratch);
  at::Tensor eigen_ridge;
  auto root_of_normalized = normalized_root(keep_normalized_root ? normalized : std::move(normalized), epsilon, p,
      options, keep_normalized_root, basis, scratch, eigen_ridge);
  // Â as asked for, (A + ε_eff I)/s, where the method put (part of) ε_eff on the
  // eigenvalues only: the diagnostics' residual is measured against it.
  if (keep_normalized_root && eigen_ridge.defined()) {
    normalized.diagonal(0, -2, -1).add_(eigen_ridge.view({-1, 1}));
  }
  if (basis != nullptr) basis->valid.logical_and_(admissible.view({-1}));  // an identity stood in for those
  // An inadmissible matrix's root is NaN: the unscaling writes it, with no pass of its own.
  auto unscale = scale.pow(-1.0 / static_cast<double>(p))
                     .masked_fill_(admissible.logical_not(), std::numeric_limits<double>::quiet_NaN());
  at::Tensor root;
  if (keep_normalized_root) {
    root = scratch.empty_like(root_of_normalized);
    at::mul_out(root, root_of_normalized, unscale);
  } else {
    root = root_of_normalized.mul_(unscale);
  }
  return {std::move(root), std::move(normalized), std::move(root_of_normalized)};
}

// Shared front end: checks, 2-D ↔ 3-D, empty stacks.
template <typename Finish>
auto with_stack(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, Finish finish) {
  linalg::check_square_stack(matrices, "dash::inverse_root");
  check_inverse_root_options(p, options);
  TORCH_CHECK_VALUE(options.method() != RootMethod::Auto,
      "dash::inverse_root: RootMethod::Auto is chosen per stack, by "
      "dash::Dash or by choose_root_method(); inverse_root() needs evd, cn, ndb or chebyshev");
  const bool single = matrices.dim() == 2;
  auto stack = single ? matrices.unsqueeze(0) : matrices;
  return finish(stack, single);
}

}  // namespace

InverseRootWorkspace::InverseRootWorkspace() : scratch_(std::make_unique<kernels::Scratch>()) {}
InverseRootWorkspace::~InverseRootWorkspace() = default;
InverseRootWorkspace::InverseRootWorkspace(InverseRootWorkspace&&) noexcept = default;
InverseRootWorkspace& InverseRootWorkspace::operator=(InverseRootWorkspace&&) noexcept = default;

int64_t InverseRootWorkspace::bytes() const { return scratch_ ? scratch_->bytes() : 0; }

at::Tensor inverse_root(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, InverseRootWorkspace& workspace) {
  return with_stack(matrices, p, options, [&](const at::Tensor& stack, bool single) {
    if (stack.numel() == 0) {
      return matrices.to(work_type(matrices)).clone();
    }
    TORCH_CHECK(workspace.scratch_, "dash::inverse_root: the workspace was moved from");
    auto root = solve(stack, p, options, /*keep_normalized_root=*/false, *workspace.scratch_).root;
    return single ? root.squeeze(0) : root;
  });
}

at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options,
    InverseRootWorkspace& workspace, Eigenbasis& basis) {
  TORCH_CHECK(options.method() == RootMethod::EVD,
      "dash::inverse_root: an Eigenbasis is for RootMethod::EVD, got method ", static_cast<int>(options.method()));
  TORCH_CHECK(matrices.dim() == 3, "dash::inverse_root: an Eigenbasis goes with an (N, b, b) stack, got shape ",
      matrices.sizes());
  return with_stack(matrices, p, options, [&](const at::Tensor& stack, bool) {
    TORCH_CHECK(workspace.scratch_, "dash::inverse_root: the workspace was moved from");
    if (stack.numel() == 0) return matrices.to(work_type(matrices)).clone();
    return solve(stack, p, options, /*keep_normalized_root=*/false, *workspace.scratch_, &basis).root;
  });
}

at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options) {
  InverseRootWorkspace workspace;
  return inverse_root(matrices, p, options, workspace);
}

InverseRootResult inverse_root_with_diagnostics(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options) {
  return with_stack(matrices, p, options, [&](const at::Tensor& stack, bool single) {
    if (stack.numel() == 0) {
      auto empty = at::empty({stack.size(0)}, stack.options().dtype(work_type(stack)));
      return InverseRootResult{matrices.to(work_type(matrices)).clone(), empty, empty.to(at::kBool)};
    }
    kernels::Scratch scratch;
    auto solution = solve(stack, p, options, /*keep_normalized_root=*/true, scratch);
    // X^p (A + ε_eff I) − I, ε_eff = max(ε, ε_rel·λ_max), for every method (Â holds
    // ε_eff, solve()), evaluated in normalised units where X̂^p Â has the same
    // value and no entry can overflow. Always in full precision: it is a check.
    auto power = at::linalg_matrix_power(solution.normalized_root, p);  // O(log p) products
    auto residual =
        linalg::relative_frobenius(at::baddbmm(linalg::identity_like(power), power, solution.normalized, -1.0, 1.0));
    auto finite = at::isfinite(solution.root).all(-1).all(-1);
    if (single) {
      return InverseRootResult{solution.root.squeeze(0), residual.squeeze(0), finite.squeeze(0)};
    }
    return InverseRootResult{solution.root, residual, finite};
  });
}

}  // namespace dash
