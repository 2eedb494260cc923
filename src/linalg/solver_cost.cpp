#include <dash/solver_cost.h>

#include "linalg/solvers.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

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

// Matmuls of one Newton–DB pass (newton_denman_beavers.cpp). A step's E costs
// nothing for a cubic and one matmul (c₂W·W) for a quintic, and its Z·Y one
// more after the first step (Z₀ = I); then Y·E and E·Z, of which the last step
// skips the one the pass does not return, and the first step has only Y.
int64_t newton_db_pass_matmuls(const std::vector<linalg::OddPolynomial>& steps, bool returns_root) {
  int64_t matmuls = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const bool first = k == 0;
    const bool last = k + 1 == steps.size();
    matmuls += (steps[k].coefficients[2] != 0.0 ? 1 : 0) + (first ? 0 : 1);
    if (!last || returns_root) matmuls += 1;               // Y·E
    if (!first && (!last || !returns_root)) matmuls += 1;  // E·Z
  }
  return matmuls;
}

int64_t newton_db_matmuls(int64_t p, const InverseRootOptions& options) {
  const auto schedule = linalg::newton_db_schedule(p, options.newton(), options.newton_db(), options.precision());
  int64_t matmuls = p == 1 ? 1 : 0;  // p = 1 squares the inverse square root
  for (size_t pass = 0; pass < schedule.size(); ++pass) {
    matmuls += newton_db_pass_matmuls(schedule[pass], /*returns_root=*/pass + 1 < schedule.size());
  }
  return matmuls;
}

double scaling_flops(int64_t b, const InverseRootOptions& options) {
  const double bd = static_cast<double>(b);
  switch (options.scaling().method()) {
    case Scaling::Frobenius:
      return 0.0;
    case Scaling::PowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.scaling().iterations());
    case Scaling::MultiPowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.scaling().iterations() * options.scaling().vectors());
  }
  return 0.0;
}

}  // namespace

double inverse_root_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options) {
  TORCH_CHECK(count >= 0 && b >= 0 && p >= 1, "dash::inverse_root_flops: need count >= 0, b >= 0, p >= 1; got ", count,
      ", ", b, ", ", p);
  const double matmul = 2.0 * static_cast<double>(b) * static_cast<double>(b) * static_cast<double>(b);
  double per_matrix = 0.0;
  switch (options.method()) {
    case RootMethod::EVD:
      per_matrix = 9.0 / 2.0 * matmul + matmul;  // 9 b³ eigh + Q diag Qᵀ
      break;
    case RootMethod::CoupledNewton:
      // Step 1: X₁ = c·N is free; every step: X·N (not in step 1) and N^p·M.
      per_matrix = scaling_flops(b, options) +
                   matmul * static_cast<double>(options.newton().steps() * (1 + power_times_matmuls(p)) - 1);
      break;
    case RootMethod::NewtonDB:
      per_matrix = scaling_flops(b, options) + matmul * static_cast<double>(newton_db_matmuls(p, options));
      break;
    case RootMethod::Chebyshev:
      per_matrix = scaling_flops(b, options) +
                   matmul * static_cast<double>(std::max<int64_t>(options.chebyshev().degree() - 1, 0));
      break;
    case RootMethod::Auto:
      TORCH_CHECK(false, "dash::inverse_root_flops: RootMethod::Auto has no cost of its own; pass the method it chose");
  }
  return static_cast<double>(count) * per_matrix;
}

}  // namespace dash
