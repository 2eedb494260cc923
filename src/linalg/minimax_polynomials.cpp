#include "linalg/minimax_polynomials.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace dash::linalg {
namespace {

constexpr int kMaxExchanges = 100;
// Narrower intervals (around 1, late in a schedule) make the Remez system singular
// in double precision; there the Newton–Schulz polynomials, whose error is
// O(width^((d+1)/2)) around 1, are as good as minimax to within rounding.
constexpr double kNarrowestMinimaxInterval = 1e-3;

void check_degree(int degree) {
  TORCH_CHECK(degree == 3 || degree == 5, "dash: the NewtonDB step polynomials have degree 3 or 5, got ", degree);
}

// Newton–Schulz on an interval around 1: both polynomials increase up to x = 1 and
// decrease after it, so their error there is largest at an end.
OddPolynomial newton_schulz_on(int degree, double lower, double upper) {
  auto p = newton_schulz_polynomial(degree);
  p.error = std::max(std::abs(1.0 - p(lower)), std::abs(1.0 - p(upper)));
  return p;
}

// Solves the (n × n) system a·s = rhs (row-major, n ≤ 4) by Gaussian elimination
// with partial pivoting.
template <size_t N>
std::array<double, N> solve(std::array<std::array<double, N>, N> a, std::array<double, N> rhs) {
  for (size_t col = 0; col < N; ++col) {
    size_t pivot = col;
    for (size_t row = col + 1; row < N; ++row) {
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    }
    std::swap(a[col], a[pivot]);
    std::swap(rhs[col], rhs[pivot]);
    for (size_t row = col + 1; row < N; ++row) {
      const double factor = a[row][col] / a[col][col];
      for (size_t k = col; k < N; ++k) a[row][k] -= factor * a[col][k];
      rhs[row] -= factor * rhs[col];
    }
  }
  std::array<double, N> s{};
  for (size_t row = N; row-- > 0;) {
    double sum = rhs[row];
    for (size_t k = row + 1; k < N; ++k) sum -= a[row][k] * s[k];
    s[row] = sum / a[row][row];
  }
  return s;
}

// p with p(x_i) + (−1)^i E = 1 at the M + 2 points (the Remez levelled-error system).
template <size_t M>
OddPolynomial levelled(const std::array<double, M + 2>& points) {
  constexpr size_t n = M + 2;
  std::array<std::array<double, n>, n> a{};
  std::array<double, n> rhs{};
  for (size_t i = 0; i < n; ++i) {
    const double x = points[i];
    for (size_t j = 0; j <= M; ++j) a[i][j] = std::pow(x, static_cast<double>(2 * j + 1));
    a[i][M + 1] = (i % 2 == 0) ? 1.0 : -1.0;
    rhs[i] = 1.0;
  }
  const auto s = solve<n>(a, rhs);
  OddPolynomial p;
  for (size_t j = 0; j <= M; ++j) p.coefficients[j] = s[j];
  p.error = std::abs(s[M + 1]);
  return p;
}

// Interior extrema of 1 − p in (lower, upper): p'(x) = c₀ + 3c₁t + 5c₂t² with t = x².
std::vector<double> interior_extrema(const OddPolynomial& p, double lower, double upper) {
  const auto& c = p.coefficients;
  std::vector<double> roots_t;
  if (c[2] == 0.0) {
    if (c[1] != 0.0) roots_t.push_back(-c[0] / (3.0 * c[1]));
  } else {
    const double qa = 5.0 * c[2];
    const double qb = 3.0 * c[1];
    const double discriminant = qb * qb - 4.0 * qa * c[0];
    if (discriminant >= 0.0) {
      // The numerically stable pair of quadratic roots.
      const double q = -0.5 * (qb + std::copysign(std::sqrt(discriminant), qb));
      roots_t.push_back(q / qa);
      if (q != 0.0) roots_t.push_back(c[0] / q);
    }
  }
  std::vector<double> extrema;
  for (double t : roots_t) {
    if (t > 0.0) {
      const double x = std::sqrt(t);
      if (x > lower && x < upper) extrema.push_back(x);
    }
  }
  std::sort(extrema.begin(), extrema.end());
  return extrema;
}

template <size_t M>
OddPolynomial remez(double lower, double upper) {
  constexpr size_t n = M + 2;
  std::array<double, n> points{};
  // Start from the Chebyshev extrema of the interval.
  for (size_t i = 0; i < n; ++i) {
    points[i] = 0.5 * (lower + upper) - 0.5 * (upper - lower) * std::cos(M_PI * static_cast<double>(i) / (n - 1));
  }
  OddPolynomial p = levelled<M>(points);
  for (int exchange = 0; exchange < kMaxExchanges; ++exchange) {
    const auto extrema = interior_extrema(p, lower, upper);
    if (extrema.size() != M) break;  // the levelled polynomial is already as good as it gets
    double moved = 0.0;
    for (size_t i = 0; i < M; ++i) {
      moved = std::max(moved, std::abs(extrema[i] - points[i + 1]));
      points[i + 1] = extrema[i];
    }
    p = levelled<M>(points);
    if (moved <= 1e-15 * upper) break;
  }
  // The levelled error is a lower bound of the true maximum; report the maximum at
  // the alternation points and the interior extrema, which is the true one.
  double worst = std::max(std::abs(1.0 - p(lower)), std::abs(1.0 - p(upper)));
  for (double x : interior_extrema(p, lower, upper)) worst = std::max(worst, std::abs(1.0 - p(x)));
  p.error = worst;
  return p;
}

}  // namespace

OddPolynomial newton_schulz_polynomial(int degree) {
  check_degree(degree);
  return {
      degree == 3 ? std::array<double, 3>{1.5, -0.5, 0.0} : std::array<double, 3>{15.0 / 8.0, -10.0 / 8.0, 3.0 / 8.0},
      0.0};
}

double OddPolynomial::operator()(double x) const {
  const double t = x * x;
  return x * (coefficients[0] + t * (coefficients[1] + t * coefficients[2]));
}

OddPolynomial minimax_odd_polynomial(double lower, double upper, int degree) {
  TORCH_CHECK(lower > 0.0 && upper - lower >= kNarrowestMinimaxInterval && std::isfinite(upper),
      "dash: a minimax polynomial needs 0 < lower and upper - lower >= ", kNarrowestMinimaxInterval, ", got [", lower,
      ", ", upper, "]");
  check_degree(degree);
  return degree == 3 ? remez<1>(lower, upper) : remez<2>(lower, upper);
}

std::vector<OddPolynomial> minimax_schedule(
    double lower, double upper, int degree, int64_t max_steps, double target_error) {
  TORCH_CHECK(lower > 0.0 && lower < upper && std::isfinite(upper),
      "dash: a minimax schedule needs 0 < lower < upper, got [", lower, ", ", upper, "]");
  check_degree(degree);
  TORCH_CHECK(max_steps >= 1 && target_error > 0.0,
      "dash: a minimax schedule needs max_steps >= 1 and target_error > 0, got ", max_steps, " and ", target_error);
  std::vector<OddPolynomial> steps;
  for (int64_t k = 0; k < max_steps; ++k) {
    steps.push_back(upper - lower >= kNarrowestMinimaxInterval ? minimax_odd_polynomial(lower, upper, degree)
                                                               : newton_schulz_on(degree, lower, upper));
    const double error = steps.back().error;
    if (error <= target_error) break;
    // Every x of [lower, upper] now lies in [1 − E, 1 + E].
    lower = 1.0 - error;
    upper = 1.0 + error;
  }
  return steps;
}

}  // namespace dash::linalg
