// Residual measure and early-stop test shared by the Newton-type solvers.

#include "linalg/solvers.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::linalg {

at::Tensor relative_frobenius(const at::Tensor& residual) {
  return at::linalg_vector_norm(residual, 2, {1, 2}) / std::sqrt(static_cast<double>(residual.size(-1)));
}

bool is_tolerance_check_step(int64_t step, double tolerance, int64_t check_interval) {
  return tolerance > 0.0 && (step + 1) % check_interval == 0;
}

bool all_within_tolerance(const at::Tensor& residual, double tolerance) {
  // NaN compares false, so a non-finite matrix never stops the stack early.
  return (residual.max() <= tolerance).item<bool>();
}

}  // namespace dash::linalg
