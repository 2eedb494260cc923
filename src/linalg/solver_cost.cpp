#include <dash/solver_cost.h>

#include <c10/util/Exception.h>

#include <algorithm>

namespace dash {
namespace {

// Matmuls of N^p·M by repeated squaring (coupled_newton.cpp): one per squaring
// and one per set bit of p.
int64_t power_times_matmuls(int64_t p) {
  int64_t squarings = 0;
  int64_t products = 0;
  for (int64_t rest = p; rest > 0; rest >>= 1) {
    products += rest & 1;
    squarings += rest > 1;
  }
  return squarings + products;
}

// Matmuls of one Newton–DB pass: 1 in the optimised first step, 3 in each other.
int64_t newton_db_pass_matmuls(int64_t steps) { return 1 + 3 * (steps - 1); }

int64_t newton_db_matmuls(int64_t p, int64_t steps) {
  if (p == 1) {
    return newton_db_pass_matmuls(steps) + 1;
  }
  int64_t passes = 0;
  for (int64_t rest = p; rest > 1; rest >>= 1) {
    ++passes;
  }
  return passes * newton_db_pass_matmuls(steps);
}

double scaling_flops(int64_t b, const InverseRootOptions& options) {
  const double bd = static_cast<double>(b);
  switch (options.scaling()) {
    case Scaling::Frobenius:
      return 0.0;
    case Scaling::PowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.power_iterations());
    case Scaling::MultiPowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.power_iterations() * options.power_vectors());
  }
  return 0.0;
}

}  // namespace

double inverse_root_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options) {
  TORCH_CHECK(count >= 0 && b >= 0 && p >= 1,
      "dash::inverse_root_flops: need count >= 0, b >= 0, p >= 1; got ", count, ", ", b, ", ", p);
  const double matmul = 2.0 * static_cast<double>(b) * static_cast<double>(b) * static_cast<double>(b);
  double per_matrix = 0.0;
  switch (options.method()) {
    case RootMethod::EVD:
      per_matrix = 9.0 / 2.0 * matmul + matmul;  // 9 b³ eigh + Q diag Qᵀ
      break;
    case RootMethod::CoupledNewton:
      // Step 1: X₁ = c·N is free; every step: X·N (not in step 1) and N^p·M.
      per_matrix = scaling_flops(b, options) +
          matmul * static_cast<double>(options.newton_steps() * (1 + power_times_matmuls(p)) - 1);
      break;
    case RootMethod::NewtonDB:
      per_matrix = scaling_flops(b, options) +
          matmul * static_cast<double>(newton_db_matmuls(p, options.newton_steps()));
      break;
    case RootMethod::Chebyshev:
      per_matrix = scaling_flops(b, options) +
          matmul * static_cast<double>(std::max<int64_t>(options.chebyshev_degree() - 1, 0));
      break;
  }
  return static_cast<double>(count) * per_matrix;
}

}  // namespace dash
