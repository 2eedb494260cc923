// The minimax step polynomials of NewtonDB (linalg/minimax_polynomials.h), checked
// by the equioscillation theorem on a dense grid (independent of the Remez
// exchange's own extrema) and by composing schedules on the real line.

#include "linalg/minimax_polynomials.h"

#include <c10/util/Exception.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dash::linalg {
namespace {

std::vector<double> grid(double lower, double upper, int points) {
  std::vector<double> x(points);
  for (int i = 0; i < points; ++i) x[i] = lower + (upper - lower) * i / (points - 1);
  return x;
}

// Chebyshev's alternation theorem: p is the best approximation of 1 by odd
// polynomials of its degree on [lower, upper] iff 1 − p reaches ±max|1 − p| with
// alternating signs at (degree + 1)/2 + 1 points. Counted on a dense grid.
int alternations(const OddPolynomial& p, double lower, double upper, double level) {
  int count = 0;
  int sign = 0;
  for (double x : grid(lower, upper, 400001)) {
    const double e = 1.0 - p(x);
    if (std::abs(e) < level * (1.0 - 1e-6)) continue;
    const int s = e > 0 ? 1 : -1;
    if (s != sign) {
      ++count;
      sign = s;
    }
  }
  return count;
}

TEST(MinimaxPolynomials, EquioscillateAtDegreeOverTwoPlusTwoPoints) {
  for (int degree : {3, 5}) {
    for (double lower : {1e-6, 1e-3, 0.1, 0.5}) {
      for (double upper : {1.0, 1.2}) {
        const auto p = minimax_odd_polynomial(lower, upper, degree);
        double worst = 0.0;
        for (double x : grid(lower, upper, 400001)) worst = std::max(worst, std::abs(1.0 - p(x)));
        SCOPED_TRACE(
            "degree " + std::to_string(degree) + " on [" + std::to_string(lower) + ", " + std::to_string(upper) + "]");
        EXPECT_NEAR(p.error, worst, 1e-9 * worst);  // the reported error is the true maximum
        EXPECT_EQ(alternations(p, lower, upper, worst), (degree + 1) / 2 + 1);
        EXPECT_LT(worst, 1.0);  // every x of the interval moves closer to 1
      }
    }
  }
}

TEST(MinimaxPolynomials, BeatNewtonSchulzOnTheSameInterval) {
  // (3x − x³)/2 is one odd cubic; the minimax cubic cannot be worse on any interval.
  for (double lower : {1e-4, 1e-2, 0.3, 0.9}) {
    const auto best = minimax_odd_polynomial(lower, 1.0, 3);
    const OddPolynomial newton_schulz{{1.5, -0.5, 0.0}, 0.0};
    double newton_schulz_error = 0.0;
    for (double x : grid(lower, 1.0, 100001)) {
      newton_schulz_error = std::max(newton_schulz_error, std::abs(1.0 - newton_schulz(x)));
    }
    EXPECT_LE(best.error, newton_schulz_error) << "lower " << lower;
  }
  // Small x: the first cubic lifts by ≈ 3√3 ≈ 5.2 (the largest slope at 0 of an odd
  // cubic that stays within (0, 2) on [0, 1]), the quintic by more.
  EXPECT_NEAR(minimax_odd_polynomial(1e-8, 1.0, 3).coefficients[0], 3.0 * std::sqrt(3.0), 1e-3);
  EXPECT_GT(minimax_odd_polynomial(1e-8, 1.0, 5).coefficients[0], 8.0);
}

TEST(MinimaxPolynomials, ScheduleKeepsItsBoundAndNeedsFarFewerStepsThanNewtonSchulz) {
  for (int degree : {3, 5}) {
    const double lower = 1e-3;  // x = √b for a normalised spectrum down to 1e-6
    const auto steps = minimax_schedule(lower, 1.0, degree, 50, 1e-7);
    ASSERT_LE(steps.back().error, 1e-7);
    for (size_t k = 1; k < steps.size(); ++k) EXPECT_LT(steps[k].error, steps[k - 1].error);
    // Composing the steps keeps every x of [lower, 1] within the last bound.
    double worst = 0.0;
    for (double x : grid(lower, 1.0, 20001)) {
      for (const auto& p : steps) x = p(x);
      worst = std::max(worst, std::abs(1.0 - x));
    }
    EXPECT_LE(worst, steps.back().error * (1.0 + 1e-6) + 1e-14) << "degree " << degree;
    // Newton–Schulz from the same x, to the same error.
    int newton_schulz_steps = 0;
    for (double x = lower; std::abs(1.0 - x) > 1e-7; ++newton_schulz_steps) x = 1.5 * x - 0.5 * x * x * x;
    EXPECT_LE(static_cast<double>(steps.size()), 0.6 * newton_schulz_steps) << "degree " << degree;
  }
}

TEST(MinimaxPolynomials, StopsAtTheCapAndRejectsBadIntervals) {
  EXPECT_EQ(minimax_schedule(1e-6, 1.0, 5, 2, 1e-7).size(), 2u);
  EXPECT_THROW(minimax_odd_polynomial(0.0, 1.0, 3), c10::Error);
  EXPECT_THROW(minimax_odd_polynomial(0.5, 0.5, 3), c10::Error);
  EXPECT_THROW(minimax_schedule(0.5, 0.4, 3, 5, 1e-7), c10::Error);
  EXPECT_THROW(minimax_odd_polynomial(0.1, 1.0, 4), c10::Error);
  EXPECT_THROW(minimax_schedule(0.1, 1.0, 3, 0, 1e-7), c10::Error);
}

}  // namespace
}  // namespace dash::linalg
