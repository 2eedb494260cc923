// Newton–Denman–Beavers square roots in inverse-free (coupled Newton–Schulz)
// form (Higham, "Functions of Matrices", 2008, eq. 6.35; spec §5 "NDB"), with
// either the fixed Newton–Schulz step or per-step minimax polynomials.
//
// For a normalised B: Y₀ = B, Z₀ = I; each step E = q_k(ZY), Y ← Y E, Z ← E Z.
// Every iterate is a polynomial in B, so on an eigenvalue b with x = √b the step is
// the scalar sign iteration x ← x·q_k(x²) = p_k(x), Y = √b·x and Z = x/√b:
// Y → B^{1/2} and Z → B^{-1/2} as x → 1. Newton–Schulz is q(w) = (3 − w)/2,
// converging from anywhere in 0 < x < √3 but lifting a small x only by 1.5 per
// step; the minimax polynomials (linalg/minimax_polynomials.h) are made for
// x ∈ [√ℓ, 1] and lift small x by 5–8 per step.
//
// Roots: p = 2 is one pass (Z); p = 4 is a second pass on the first pass's Y, whose
// spectrum is the square root of B's and needs no new scaling (√s in unnormalised
// units); p = 2^k chains k passes; p = 1 squares the p = 2 result. A pass whose Y
// feeds the next pass skips its last Z update, the last pass its last Y update.
//
// Y E and E Z are computed as symmetric products (Product::Symmetric,
// batched_matmul.h: one triangle on a CPU), W = Z Y and W·W as whole products. All
// are symmetric in exact arithmetic, but the coupled iteration is stable only
// because its Fréchet derivative at the fixed point (Y, Z) = (B^{1/2}, B^{-1/2}) is
// idempotent (Higham 2008, ch. 6): for symmetric perturbations (u, v) of the
// iterates, δ(Y E) = ½(u − Y v Y) and δ(E Z) = ½(v − Z u Z) to first order, both
// symmetric, so mirroring a triangle of them changes nothing at first order; but
// δW = v Y + Z u is not symmetric, and its asymmetry is what keeps the pair coupled.
// With W mirrored too, test matrices of κ ≈ 1e3–1e6 diverged after 13–16 steps
// (test_special_matrices, test_inverse_root_accuracy, test_newton_db_minimax).
//
// Because every iterate is a polynomial in B, the whole iteration is a function φ of
// B's eigenvalues: newton_db_eigenvalue_root() runs it on the eigenvalues instead
// (NewtonDBEvaluation::Eigh), the same steps as scalar recurrences.
//
// Every iterate lives in a Scratch buffer and is dropped as soon as it is dead, so
// a pass holds four stack-sized buffers (B or W, E, Y, Z) and allocates nothing
// once the Scratch has them.

#include "linalg/batched_matmul.h"
#include "linalg/minimax_polynomials.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace dash::linalg {
namespace {

// What a pass returns: Y ≈ B^{1/2} or Z ≈ B^{-1/2}.
enum class PassOutput { Root, InverseRoot };

// c₀I of a step's polynomial, in a (b, b) Scratch buffer that is refilled only when
// c₀ changes (never, for Newton–Schulz): no step allocates.
class ConstantTerm {
 public:
  ConstantTerm(const at::Tensor& like, kernels::Scratch& scratch)
      : identity_(scratch.empty({like.size(-1), like.size(-1)}, like.options())) {}

  const at::Tensor& for_step(const OddPolynomial& q) {
    if (!filled_ || q.coefficients[0] != c0_) {
      c0_ = q.coefficients[0];
      identity_.zero_();
      identity_.diagonal().fill_(c0_);
      filled_ = true;
    }
    return identity_;
  }

 private:
  at::Tensor identity_;
  bool filled_ = false;
  double c0_ = 0.0;
};

// E = q(W) = c₀I + c₁W (+ c₂W²) with W = Z·Y, or W = Y when Z is the identity (the
// first step). `residual`: set to ‖W − I‖_F/√b per matrix when asked for.
// The usual step (c₂ = 0, Z given) returns E in the operand dtype, ready for its
// two products; the others return it in the iterate dtype.
at::Tensor step_matrix(const at::Tensor& z, const at::Tensor& y, const OddPolynomial& q, const at::Tensor& c0_identity,
    MatmulPrecision precision, kernels::Scratch& scratch, at::Tensor* residual) {
  const auto& c = q.coefficients;
  // (A 16-bit E read off for a residual would resolve W − I only to ulp(1)/|c₁|:
  // 16-bit check steps form E from W below.)
  if (z.defined() && c[2] == 0.0 && (residual == nullptr || precision == MatmulPrecision::FP32)) {
    // c₁ scales Z·Y inside the matmul, and c₀ goes on the diagonal: the product is
    // the only pass over the stack, in 16 bits as in 32.
    auto e = operand_matmul(z, y, precision, scratch, c[1]);
    add_to_diagonal(e, c0_identity.diagonal(), scratch);
    if (residual != nullptr) {
      // W − I = (E − (c₀ + c₁)I)/c₁: the residual comes for free.
      auto shifted = e - c0_identity;
      shifted.diagonal(0, -2, -1).sub_(c[1]);
      *residual = relative_frobenius(shifted) / std::abs(c[1]);
    }
    return e;
  }
  // c₀I + c₁W, then + c₂W·W in place: W and E are the only buffers the step needs.
  auto e = scratch.empty(y.sizes(), c0_identity.options());
  const auto w = z.defined() ? operand_matmul(z, y, precision, scratch) : y;
  const auto wide = widened(w, e.scalar_type(), scratch);
  at::add_out(e, c0_identity, wide, c[1]);
  if (c[2] != 0.0) matmul_add_(e, w, w, /*beta=*/1.0, /*alpha=*/c[2], precision, scratch);
  if (residual != nullptr) *residual = relative_frobenius(wide - identity_like(e));
  return e;
}

// Takes B by value so that its buffer is free for the iterates after the first step.
// Y, Z and E stay in the operand dtype (batched_matmul.h), and the pass returns
// the one it was asked for as it is: in the operand dtype, or in B's when there is
// a single step (Z₁ = E₀).
at::Tensor newton_db_pass(at::Tensor b, const std::vector<OddPolynomial>& steps, PassOutput needed,
    const NewtonOptions& newton, MatmulPrecision precision, kernels::Scratch& scratch) {
  ConstantTerm constant(b, scratch);
  const int64_t count = static_cast<int64_t>(steps.size());
  // First step, Z₀ = I: E₀ = q₀(B), Y₁ = B E₀ and Z₁ = E₀ save the Z·Y and E·Z matmuls.
  auto e = step_matrix(at::Tensor(), b, steps[0], constant.for_step(steps[0]), precision, scratch, nullptr);
  // Z₁ = E₀ is returned as it is when there is no second step.
  if (count > 1) e = as_operand(e, precision, scratch);
  at::Tensor y;
  if (count > 1 || needed == PassOutput::Root) y = operand_matmul(b, e, precision, scratch, 1.0, Product::Symmetric);
  b = at::Tensor();
  auto z = std::move(e);
  for (int64_t step = 1; step < count; ++step) {
    const bool check = is_tolerance_check_step(step, newton.tolerance(), newton.check_interval());
    at::Tensor residual;
    e = at::Tensor();  // the last step's E is dead: its buffer serves this step's W or E
    e = step_matrix(z, y, steps[step], constant.for_step(steps[step]), precision, scratch, check ? &residual : nullptr);
    if (check && all_within_tolerance(residual, newton.tolerance())) break;
    e = as_operand(e, precision, scratch);
    const bool last = step + 1 == count;
    if (!last || needed == PassOutput::Root) y = operand_matmul(y, e, precision, scratch, 1.0, Product::Symmetric);
    if (!last || needed == PassOutput::InverseRoot)
      z = operand_matmul(e, z, precision, scratch, 1.0, Product::Symmetric);
  }
  return needed == PassOutput::Root ? y : z;
}

// The minimax design stops once its bound is a few roundings of the matmul inputs.
double minimax_target_error(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::FP32:
      return 4.0 * std::ldexp(1.0, -24);
    case MatmulPrecision::FP16:
      return 4.0 * std::ldexp(1.0, -11);
    case MatmulPrecision::BF16:
      return 4.0 * std::ldexp(1.0, -8);
  }
  return 0.0;
}

// newton_db_pass() on eigenvalues (N, b): Y and Z are diagonal in B's eigenbasis,
// so each step of the coupled iteration (Higham 2008, eq. 6.35) is E = q(ZY),
// Y ← YE, Z ← EZ on their diagonals, and the tolerance check sees the same
// ‖ZY − I‖_F/√b as the matrix iteration's. W and E are written in place: no
// step allocates, as in the matrix iteration.
at::Tensor eigenvalue_pass(
    const at::Tensor& b, const std::vector<OddPolynomial>& steps, PassOutput needed, const NewtonOptions& newton) {
  auto y = b.clone();
  auto z = at::ones_like(b);
  auto w = at::empty_like(b);
  auto e = at::empty_like(b);
  for (size_t step = 0; step < steps.size(); ++step) {
    at::mul_out(w, y, z);
    if (step > 0 && is_tolerance_check_step(static_cast<int64_t>(step), newton.tolerance(), newton.check_interval()) &&
        all_within_tolerance((w - 1.0).square_().mean(/*dim=*/1).sqrt_(), newton.tolerance())) {
      break;
    }
    const auto& c = steps[step].coefficients;
    at::mul_out(e, w, c[2]).add_(c[1]).mul_(w).add_(c[0]);  // q(w) = c₀ + c₁w + c₂w²
    y.mul_(e);
    z.mul_(e);
  }
  return needed == PassOutput::Root ? y : z;
}

}  // namespace

std::vector<std::vector<OddPolynomial>> newton_db_schedule(
    int64_t p, const NewtonOptions& newton, const NewtonDBOptions& options, MatmulPrecision precision) {
  TORCH_CHECK(
      p >= 1 && (p & (p - 1)) == 0, "dash::inverse_root: NewtonDB computes roots p = 1 or a power of two, got p = ", p);
  int64_t passes = 0;
  for (int64_t rest = std::max<int64_t>(p, 2); rest > 1; rest /= 2) ++passes;
  std::vector<std::vector<OddPolynomial>> schedule;
  if (options.polynomial() == NewtonDBPolynomial::NewtonSchulz) {
    schedule.assign(passes, std::vector<OddPolynomial>(newton.steps(), newton_schulz_polynomial(3)));
    return schedule;
  }
  // The first pass sees x = √b ∈ [√ℓ, 1]. A pass that leaves x within [1 − E, 1 + E]
  // for those b gives the next pass Y = √b·x, so x' = √Y ∈ [√(√ℓ(1 − E)), √(1 + E)].
  double lower = std::sqrt(options.interval_min());
  double upper = 1.0;
  const int degree = options.polynomial() == NewtonDBPolynomial::Minimax5 ? 5 : 3;
  for (int64_t pass = 0; pass < passes; ++pass) {
    schedule.push_back(minimax_schedule(lower, upper, degree, newton.steps(), minimax_target_error(precision)));
    const double error = schedule.back().back().error;
    lower = std::sqrt(lower * std::max(1.0 - error, lower));
    upper = std::sqrt(1.0 + error);
  }
  return schedule;
}

at::Tensor newton_db_root(at::Tensor normalized, int64_t p, const NewtonOptions& newton, const NewtonDBOptions& options,
    MatmulPrecision precision, kernels::Scratch& scratch) {
  const auto schedule = newton_db_schedule(p, newton, options, precision);
  const auto iterate = normalized.scalar_type();
  if (p == 1) {
    const auto z = as_operand(
        newton_db_pass(std::move(normalized), schedule[0], PassOutput::InverseRoot, newton, precision, scratch),
        precision, scratch);
    return in_dtype(operand_matmul(z, z, precision, scratch, 1.0, Product::Symmetric), iterate, scratch);
  }
  auto input = std::move(normalized);
  for (size_t pass = 0; pass + 1 < schedule.size(); ++pass) {
    input = in_dtype(newton_db_pass(std::move(input), schedule[pass], PassOutput::Root, newton, precision, scratch),
        iterate, scratch);
  }
  // The chain gives Z_k ≈ (B^{1/2^{k-1}})^{-1/2} = B^{-1/2^k} = B^{-1/p}.
  return in_dtype(
      newton_db_pass(std::move(input), schedule.back(), PassOutput::InverseRoot, newton, precision, scratch), iterate,
      scratch);
}

at::Tensor newton_db_eigenvalue_root(const at::Tensor& values, const at::Tensor& epsilon, int64_t p,
    const NewtonOptions& newton, const NewtonDBOptions& options, const SpectralScaleOptions& scaling,
    MatmulPrecision precision, double relative_floor, at::Tensor* relative_ridge) {
  const auto schedule = newton_db_schedule(p, newton, options, precision);
  // Float64: the scalar recurrences are N·b numbers, and this way they carry no
  // rounding of their own; the root's rounding is in eigh and the product Q φ Qᵀ.
  const auto lambda = values.to(at::kDouble);
  auto scale = scaling.method() == Scaling::Frobenius ? lambda.square().sum(/*dim=*/1, /*keepdim=*/true).sqrt_()
                                                      : lambda.amax(/*dim=*/1, /*keepdim=*/true).mul_(scaling.margin());
  // The stack arrives divided by its largest entry, and an admissible matrix (its
  // diagonal ≥ 0) has λ_max at least its largest entry (interlacing on its 2 × 2
  // principal submatrices): the scale is ≥ 1 but for an all-zero matrix, which
  // then keeps the caller's scale, as in the matrix iteration.
  scale.clamp_min_(1.0);
  auto b = lambda / scale;
  // The regularisation ε/s in these units, raised as inverse_root() raises the
  // matrix iteration's: to the relative floor (then everything is divided by
  // 1 + floor), and in 16-bit modes to half a 16-bit rounding.
  auto regularisation = epsilon.reshape({-1, 1}).to(at::kDouble) / scale;
  if (relative_floor > 0.0) {
    const auto lift = (relative_floor - regularisation).clamp_min(0.0);
    if (relative_ridge != nullptr) *relative_ridge = (lift * scale).to(values.scalar_type()).view({-1, 1, 1});
    b.add_(lift).div_(1.0 + relative_floor);
    regularisation = regularisation.clamp_min(relative_floor).div_(1.0 + relative_floor);
    scale.mul_(1.0 + relative_floor);
  }
  if (precision != MatmulPrecision::FP32) b.add_((0.5 * operand_roundoff(precision) - regularisation).clamp_min_(0.0));
  for (size_t pass = 0; pass + 1 < schedule.size(); ++pass) {
    b = eigenvalue_pass(b, schedule[pass], PassOutput::Root, newton);
  }
  auto root = eigenvalue_pass(b, schedule.back(), PassOutput::InverseRoot, newton);
  if (p == 1) root.square_();  // as newton_db_root(): the p = 2 result squared
  return root.mul_(scale.pow(-1.0 / static_cast<double>(p))).to(values.scalar_type());
}

}  // namespace dash::linalg
