// Newton–Denman–Beavers square roots in inverse-free (coupled Newton–Schulz)
// form (Higham, "Functions of Matrices", 2008, eq. 6.35; spec §5 "NDB").
//
// For a normalised B: Y₀ = B, Z₀ = I; E = ½(3I − Z Y), Y ← Y E, Z ← E Z.
// Then Y → B^{1/2} and Z → B^{-1/2}; an eigenvalue w of ZY maps to w(3 − w)²/4,
// which converges to 1 from anywhere in (0, 3).
//
// Roots: p = 2 is one pass (Z); p = 4 is a second pass on the first pass's Y, whose
// spectrum is the square root of B's and needs no new scaling (√s in unnormalised
// units); p = 2^k chains k passes; p = 1 squares the p = 2 result.
//
// Every iterate lives in a Scratch buffer and is dropped as soon as it is dead, so
// a pass holds four stack-sized buffers (B, E, Y, Z, one of them reused for the next
// iterate) and allocates nothing once the Scratch has them.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>

namespace dash::linalg {
namespace {

struct SquareRoots {
  at::Tensor root;          // Y ≈ B^{1/2}
  at::Tensor inverse_root;  // Z ≈ B^{-1/2}
};

// Takes B by value so that its buffer is free for the iterates after the first step.
SquareRoots newton_db_pass(at::Tensor b, const NewtonOptions& options, Scratch& scratch) {
  const auto precision = options.precision;
  const auto identity = identity_like(b);
  const auto three_halves = identity * 1.5;
  // Optimised first step: Z₀ = I makes E₀ = ½(3I − B), Y₁ = B E₀ and Z₁ = E₀,
  // which saves the Z·Y and E·Z matmuls.
  auto e = scratch.empty_like(b);
  at::add_out(e, three_halves, b, -0.5);
  auto y = matmul(b, e, precision, scratch);
  b = at::Tensor();
  auto z = std::move(e);
  for (int64_t step = 1; step < options.steps; ++step) {
    e = scratch.empty_like(y).copy_(three_halves.expand_as(y));
    matmul_add_(e, z, y, /*beta=*/1.0, /*alpha=*/-0.5, precision, scratch);
    if (is_tolerance_check_step(step, options.tolerance, options.check_interval) &&
        // Z Y − I = 2 (I − E): the residual comes for free.
        all_within_tolerance(relative_frobenius(e - identity) * 2.0, options.tolerance)) {
      break;
    }
    y = matmul(y, e, precision, scratch);
    z = matmul(e, z, precision, scratch);
  }
  return {std::move(y), std::move(z)};
}

}  // namespace

at::Tensor newton_db_root(at::Tensor normalized, int64_t p, const NewtonOptions& options, Scratch& scratch) {
  TORCH_CHECK(p >= 1 && (p & (p - 1)) == 0,
      "dash::inverse_root: NewtonDB computes roots p = 1 or a power of two, got p = ", p);
  if (p == 1) {
    auto half = newton_db_pass(std::move(normalized), options, scratch).inverse_root;
    return matmul(half, half, options.precision, scratch);
  }
  auto input = std::move(normalized);
  at::Tensor result;
  for (int64_t remaining = p; remaining > 1; remaining /= 2) {
    result = at::Tensor();  // the previous pass's Z is not needed: its buffer serves this pass
    auto pass = newton_db_pass(std::move(input), options, scratch);
    input = std::move(pass.root);
    result = std::move(pass.inverse_root);
  }
  // The chain gives Z_k ≈ (B^{1/2^{k-1}})^{-1/2} = B^{-1/2^k} = B^{-1/p}.
  return result;
}

}  // namespace dash::linalg
