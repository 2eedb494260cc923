// Coupled Newton iteration for A^{-1/p} (Guo & Higham, SIAM J. Matrix Anal. Appl.
// 28(3), 2006, eq. 3.2; spec §5 "Coupled Newton").
//
// With α = −1/p, X₀ = z^{1/p} I and M₀ = z Â (z = (p+1)/2 for a normalised Â):
//   N = (1 − α) I + α M,  X ← X N,  M ← N^p M.
// The invariant M = X^p Â holds throughout, so X → Â^{-1/p} as M → I. M₀'s
// eigenvalues lie in (0, (p+1)/2], inside the convergence region (0, p+1).
//
// The iteration carries M' = −M/p = αM instead of M: the step is then
// N = (1 + 1/p) I + M', a copy with the constant added on the diagonal, and M'
// follows the same update, M' ← N^p M' (linear in M). A 16-bit M' is copied as it
// is, with no arithmetic pass over the stack. For p a power of two M' = −M/p is
// exact (barring float16 subnormals), so the iterates are the textbook form's bit
// for bit.
//
// Every product is of two polynomials in Â, so symmetric (Product::Symmetric: one
// triangle on a CPU). Mirroring a triangle is safe here, unlike for NDB's Z·Y
// (newton_denman_beavers.cpp): a first-order error μ of M dies in one step
// (N^p M = I + O(μ²) at M = I + μ), and X does not feed back into M, so what the
// mirror changes in X N (through X μ) does not accumulate.
//
// Iterates come from the Scratch and are dropped when dead: no allocation per step.
// X, M' and the powers of N only feed matmuls, so they stay in the operand dtype
// (batched_matmul.h); N is rounded to it once for its p + 1 products.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::linalg {
namespace {

// N^p · M by repeated squaring: ⌈log₂ p⌉ squarings plus one product per set bit
// (p = 4: N², N⁴, N⁴M — three matmuls). N and M commute (both are polynomials
// in Â), so the order of the factors does not matter and every product is
// symmetric (one triangle on a CPU). The result is in the operand dtype.
at::Tensor power_times(
    const at::Tensor& n, int64_t p, at::Tensor m, MatmulPrecision precision, kernels::Scratch& scratch) {
  at::Tensor square = n;
  for (int64_t rest = p;;) {
    if (rest & 1) {
      m = operand_matmul(square, m, precision, scratch, 1.0, Product::Symmetric);
    }
    rest >>= 1;
    if (rest == 0) {
      return m;
    }
    square = operand_matmul(square, square, precision, scratch, 1.0, Product::Symmetric);
  }
}

// out = t · c, written into a Scratch buffer.
at::Tensor scaled(const at::Tensor& t, double c, kernels::Scratch& scratch) {
  auto out = scratch.empty_like(t);
  return at::mul_out(out, t, at::scalar_tensor(c, t.options()));
}

}  // namespace

at::Tensor coupled_newton_root(const at::Tensor& normalized, int64_t p, const NewtonOptions& options,
    MatmulPrecision precision, kernels::Scratch& scratch) {
  const double pd = static_cast<double>(p);
  const double z = (pd + 1.0) / 2.0;
  const auto identity = identity_like(normalized);
  const auto constant = at::full({normalized.size(-1)}, 1.0 + 1.0 / pd, normalized.options());
  const auto iterate = normalized.scalar_type();
  at::Tensor x;
  at::Tensor m = scaled(normalized, -z / pd, scratch);  // M'₀ = −M₀/p
  at::Tensor n;
  for (int64_t step = 0; step < options.steps(); ++step) {
    n = at::Tensor();  // last step's N is dead: its buffer takes this one
    n = scratch.empty_like(m).copy_(m);
    add_to_diagonal(n, constant, scratch);
    // X₀ is a multiple of I, so the first X·N is a scalar multiple of N.
    if (step == 0) x = scaled(n, std::pow(z, 1.0 / pd), scratch);
    n = as_operand(n, precision, scratch);
    if (step > 0) x = operand_matmul(x, n, precision, scratch, 1.0, Product::Symmetric);
    m = power_times(n, p, std::move(m), precision, scratch);
    // ‖M − I‖ = ‖I + p·M'‖, in the iterate dtype on every device.
    if (is_tolerance_check_step(step, options.tolerance(), options.check_interval()) &&
        all_within_tolerance(
            relative_frobenius(at::add(identity, widened(m, iterate, scratch), pd)), options.tolerance())) {
      break;
    }
  }
  return in_dtype(x, iterate, scratch);
}

}  // namespace dash::linalg
