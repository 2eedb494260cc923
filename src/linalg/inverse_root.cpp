// inverse_root(): input checks, regularisation, scaling, dispatch to a solver and
// the undoing of the scaling (spec §5). The solvers themselves see only a
// normalised stack (solvers.h).

#include <dash/inverse_root.h>

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dash {

void check_inverse_root_options(int64_t p, const InverseRootOptions& options) {
  TORCH_CHECK(p >= 1, "dash::inverse_root: root p must be a positive integer, got p = ", p);
  TORCH_CHECK(options.epsilon() >= 0.0 && std::isfinite(options.epsilon()),
      "dash::inverse_root: epsilon must be finite and >= 0, got ", options.epsilon());
  TORCH_CHECK(options.newton_steps() >= 1,
      "dash::inverse_root: newton_steps must be >= 1, got ", options.newton_steps());
  TORCH_CHECK(options.power_iterations() >= 1,
      "dash::inverse_root: power_iterations must be >= 1, got ", options.power_iterations());
  TORCH_CHECK(options.power_vectors() >= 1 && options.power_vectors() <= 32,
      "dash::inverse_root: power_vectors must be in [1, 32], got ", options.power_vectors());
  TORCH_CHECK(options.power_margin() >= 1.0 && std::isfinite(options.power_margin()),
      "dash::inverse_root: power_margin must be finite and >= 1, got ", options.power_margin());
  TORCH_CHECK(options.tolerance() >= 0.0,
      "dash::inverse_root: tolerance must be >= 0 (0 = fixed steps), got ", options.tolerance());
  TORCH_CHECK(options.tolerance_check_interval() >= 1,
      "dash::inverse_root: tolerance_check_interval must be >= 1, got ", options.tolerance_check_interval());
  TORCH_CHECK(options.chebyshev_degree() >= 1,
      "dash::inverse_root: chebyshev_degree must be >= 1, got ", options.chebyshev_degree());
  TORCH_CHECK(options.chebyshev_interval_min() > 0.0 && options.chebyshev_interval_min() < 1.0,
      "dash::inverse_root: chebyshev_interval_min must be in (0, 1), got ", options.chebyshev_interval_min());
  TORCH_CHECK(options.method() != RootMethod::NewtonDB || (p & (p - 1)) == 0,
      "dash::inverse_root: NewtonDB computes roots p = 1 or a power of two, got p = ", p);
}

namespace {

void check_matrices(const at::Tensor& matrices) {
  TORCH_CHECK(matrices.defined(), "dash::inverse_root: the input tensor is undefined");
  TORCH_CHECK(matrices.dim() == 2 || matrices.dim() == 3,
      "dash::inverse_root: expected a (b, b) matrix or an (N, b, b) stack, got a tensor with ",
      matrices.dim(), " dimensions ", matrices.sizes());
  TORCH_CHECK(matrices.size(-1) == matrices.size(-2),
      "dash::inverse_root: matrices must be square, got shape ", matrices.sizes());
  TORCH_CHECK(at::isFloatingType(matrices.scalar_type()),
      "dash::inverse_root: expected a floating-point tensor, got ", matrices.scalar_type());
}

// Float32 for every 16- and 32-bit input; float64 stays float64.
at::ScalarType work_type(const at::Tensor& matrices) {
  return matrices.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

struct Solution {
  at::Tensor root;        // (N, b, b), in input units
  at::Tensor normalized;  // Â = (A + εI)/s; for EVD A/s (ε is applied to the eigenvalues)
  at::Tensor normalized_root;  // Â^{-1/p} (the root itself when not kept)
};

// `keep_normalized_root`: the diagnostics need Â^{-1/p} after the root is formed;
// otherwise the root is scaled in place. Stack-sized temporaries are kept to the
// solver's own: a stack of 600 blocks of 256² is 157 MB per tensor.
Solution solve(const at::Tensor& stack, int64_t p, const InverseRootOptions& options, bool keep_normalized_root) {
  auto a = stack.to(work_type(stack));
  const auto identity = linalg::identity_like(a);
  // A matrix with a NaN/Inf entry is solved as I (so that no solver, nor eigh,
  // sees it and the rest of the stack is unaffected) and its root set to NaN.
  auto finite_input = at::isfinite(a).all(-1).all(-1).reshape({-1, 1, 1});
  auto normalized = at::where(finite_input, a, identity);
  // EVD applies ε inside its eigenvalue heuristic (as Distributed Shampoo does);
  // the matmul-only solvers get it on the diagonal.
  const bool evd = options.method() == RootMethod::EVD;
  if (options.epsilon() > 0.0 && !evd) normalized.diagonal(0, -2, -1).add_(options.epsilon());

  // EVD needs no spectral bound, only a scale that keeps entries near 1.
  auto scale = evd ? at::maximum(normalized.amax({1, 2}, /*keepdim=*/true), normalized.amin({1, 2}, true).neg())
                   : estimate_spectral_scale(normalized, options);
  // With ε added, λ_max ≥ ε; the floor only matters for an all-zero block at ε = 0.
  scale = scale.clamp_min(std::max(options.epsilon(), static_cast<double>(std::numeric_limits<float>::min())));
  normalized.div_(scale);
  auto epsilon = options.epsilon() / scale;

  at::Tensor normalized_root;
  switch (options.method()) {
    case RootMethod::EVD:
      normalized_root = linalg::eigen_root(normalized, epsilon, p, options);
      break;
    case RootMethod::CoupledNewton:
      normalized_root = linalg::coupled_newton_root(normalized, p, options);
      break;
    case RootMethod::NewtonDB:
      normalized_root = linalg::newton_db_root(normalized, p, options);
      break;
    case RootMethod::Chebyshev:
      normalized_root = linalg::chebyshev_root(normalized, epsilon, p, options);
      break;
  }
  auto unscale = scale.pow(-1.0 / static_cast<double>(p));
  auto root = keep_normalized_root ? normalized_root * unscale : normalized_root.mul_(unscale);
  root.masked_fill_(finite_input.logical_not(), std::numeric_limits<double>::quiet_NaN());
  return {std::move(root), std::move(normalized), std::move(normalized_root)};
}

// Shared front end: checks, 2-D ↔ 3-D, empty stacks.
template <typename Finish>
auto with_stack(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, Finish finish) {
  check_matrices(matrices);
  check_inverse_root_options(p, options);
  const bool single = matrices.dim() == 2;
  auto stack = single ? matrices.unsqueeze(0) : matrices;
  return finish(stack, single);
}

}  // namespace

at::Tensor inverse_root(const at::Tensor& matrices, int64_t p, const InverseRootOptions& options) {
  return with_stack(matrices, p, options, [&](const at::Tensor& stack, bool single) {
    if (stack.numel() == 0) {
      return matrices.to(work_type(matrices)).clone();
    }
    auto root = solve(stack, p, options, /*keep_normalized_root=*/false).root;
    return single ? root.squeeze(0) : root;
  });
}

InverseRootResult inverse_root_with_diagnostics(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options) {
  return with_stack(matrices, p, options, [&](const at::Tensor& stack, bool single) {
    if (stack.numel() == 0) {
      auto empty = at::empty({stack.size(0)}, stack.options().dtype(work_type(stack)));
      return InverseRootResult{matrices.to(work_type(matrices)).clone(), empty, empty.to(at::kBool)};
    }
    auto solution = solve(stack, p, options, /*keep_normalized_root=*/true);
    // X^p (A + εI) − I, evaluated in normalised units where X̂^p Â has the same
    // value and no entry can overflow. Always in full precision: it is a check.
    auto power = solution.normalized_root;
    for (int64_t k = 1; k < p; ++k) {
      power = at::bmm(power, solution.normalized_root);
    }
    auto residual = linalg::relative_frobenius(
        at::baddbmm(linalg::identity_like(power), power, solution.normalized, -1.0, 1.0));
    auto finite = at::isfinite(solution.root).all(-1).all(-1);
    if (single) {
      return InverseRootResult{solution.root.squeeze(0), residual.squeeze(0), finite.squeeze(0)};
    }
    return InverseRootResult{solution.root, residual, finite};
  });
}

}  // namespace dash
