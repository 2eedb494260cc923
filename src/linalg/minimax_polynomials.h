#pragma once

// Odd polynomials p(x) = c₀x + c₁x³ (+ c₂x⁵) that map an interval [ℓ, u] ⊂ (0, ∞)
// as close to 1 as any such polynomial can (minimax), and greedy sequences of
// them: the per-step coefficients of the NewtonDB square-root iteration.
//
// NewtonDB's step E = q(ZY), Y ← YE, Z ← EZ acts on each eigenvalue x of the
// normalised B^{1/2} as the sign iteration x ← x·q(x²) = p(x) (Higham,
// "Functions of Matrices", 2008, §6.3 and §5.3). Newton–Schulz is the fixed
// p(x) = (3x − x³)/2. Choosing each step's p minimax-optimal on the interval the
// previous steps left, [ℓ_k, u_k] → [1 − E_k, 1 + E_k], is optimal among all
// compositions of such polynomials (Amsel, Persson, Musco & Gower, "The Polar
// Express", 2025, Thm. 3.1; Chen & Chow, "A stable scaling of Newton–Schulz",
// 2014, for the cubic): from ℓ = 1e-3 the first cubic multiplies small x by
// ≈ 5.2 (the quintic by ≈ 8.5) where Newton–Schulz multiplies by 1.5.

#include <array>
#include <cstdint>
#include <vector>

namespace dash::linalg {

struct OddPolynomial {
  /// c₀, c₁, c₂ of c₀x + c₁x³ + c₂x⁵ (c₂ = 0 for a cubic).
  std::array<double, 3> coefficients{};
  /// max |1 − p(x)| on the interval the polynomial was made for.
  double error = 0.0;

  double operator()(double x) const;
};

/// (3x − x³)/2 or (15x − 10x³ + 3x⁵)/8: the odd polynomials of degree 3 and 5 with
/// p(1) = 1 and as many vanishing derivatives there as possible (the Newton–Schulz
/// iterations for the sign function; the cubic is NewtonDB's step in the paper).
/// `error` is 0: they are not made for an interval.
OddPolynomial newton_schulz_polynomial(int degree);

/// The odd polynomial of degree 3 or 5 minimising max |1 − p(x)| over [lower, upper],
/// 0 < lower, upper − lower ≥ 1e-3, by the Remez exchange on its m + 2 alternation points (the two
/// ends and the m interior extrema, roots of p' in closed form).
OddPolynomial minimax_odd_polynomial(double lower, double upper, int degree);

/// Greedy minimax steps for x ∈ [lower, upper]: step k is optimal on the interval
/// [1 − E_{k−1}, 1 + E_{k−1}] the earlier steps leave (once that is narrower than
/// 1e-3, the Newton–Schulz polynomial of the degree, as good there). Stops after `max_steps`, or
/// at the first step whose error bound E_k is ≤ target_error (> 0).
std::vector<OddPolynomial> minimax_schedule(
    double lower, double upper, int degree, int64_t max_steps, double target_error);

}  // namespace dash::linalg
