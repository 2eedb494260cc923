// Coupled Newton iteration for A^{-1/p} (Guo & Higham, SIAM J. Matrix Anal. Appl.
// 28(3), 2006, eq. 3.2; spec §5 "Coupled Newton").
//
// With α = −1/p, X₀ = z^{1/p} I and M₀ = z Â (z = (p+1)/2 for a normalised Â):
//   N = (1 − α) I + α M,  X ← X N,  M ← N^p M.
// The invariant M = X^p Â holds throughout, so X → Â^{-1/p} as M → I. M₀'s
// eigenvalues lie in (0, (p+1)/2], inside the convergence region (0, p+1).
//
// Iterates come from the Scratch and are dropped when dead: no allocation per step.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::linalg {
namespace {

// N^p · M by repeated squaring: ⌈log₂ p⌉ squarings plus one product per set bit
// (p = 4: N², N⁴, N⁴M — three matmuls). N and M commute (both are polynomials
// in Â), so the order of the factors does not matter.
at::Tensor power_times(const at::Tensor& n, int64_t p, at::Tensor m, MatmulPrecision precision, Scratch& scratch) {
  at::Tensor square = n;
  for (int64_t rest = p;;) {
    if (rest & 1) {
      m = matmul(square, m, precision, scratch);
    }
    rest >>= 1;
    if (rest == 0) {
      return m;
    }
    square = matmul(square, square, precision, scratch);
  }
}

// out = t · c, written into a Scratch buffer.
at::Tensor scaled(const at::Tensor& t, double c, Scratch& scratch) {
  auto out = scratch.empty_like(t);
  return at::mul_out(out, t, at::scalar_tensor(c, t.options()));
}

}  // namespace

at::Tensor coupled_newton_root(const at::Tensor& normalized, int64_t p, const NewtonOptions& options,
    MatmulPrecision precision, Scratch& scratch) {
  const double pd = static_cast<double>(p);
  const double z = (pd + 1.0) / 2.0;
  const auto identity = identity_like(normalized);
  const auto diagonal = identity * (1.0 + 1.0 / pd);
  at::Tensor x;
  at::Tensor m = scaled(normalized, z, scratch);
  at::Tensor n;
  for (int64_t step = 0; step < options.steps(); ++step) {
    n = at::Tensor();  // last step's N is dead: its buffer takes this one
    n = scratch.empty_like(m);
    at::add_out(n, diagonal, m, -1.0 / pd);
    // X₀ is a multiple of I, so the first X·N is a scalar multiple of N.
    x = step == 0 ? scaled(n, std::pow(z, 1.0 / pd), scratch) : matmul(x, n, precision, scratch);
    m = power_times(n, p, std::move(m), precision, scratch);
    if (is_tolerance_check_step(step, options.tolerance(), options.check_interval()) &&
        all_within_tolerance(relative_frobenius(m - identity), options.tolerance())) {
      break;
    }
  }
  return x;
}

}  // namespace dash::linalg
