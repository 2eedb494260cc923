#include "linalg/stack_reductions.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::linalg {

at::Tensor largest_magnitude(const at::Tensor& stack) {
  return at::maximum(stack.amax({1, 2}, /*keepdim=*/true), stack.amin({1, 2}, /*keepdim=*/true).neg());
}

at::Tensor finite_matrices(const at::Tensor& stack) {
  return at::isfinite(stack.amax({1, 2}, /*keepdim=*/true)) & at::isfinite(stack.amin({1, 2}, /*keepdim=*/true));
}

at::Tensor admissible_matrices(const at::Tensor& stack, bool positive_diagonal, Scratch& scratch) {
  constexpr double kTolerance = 3.4526698e-4;  // √(float32 ε): far above rounding, far below a real asymmetry
  auto magnitude = largest_magnitude(stack);
  auto asymmetry = scratch.empty_like(stack);
  at::sub_out(asymmetry, stack, stack.transpose(1, 2));
  auto admissible = finite_matrices(stack) & (largest_magnitude(asymmetry) <= magnitude * kTolerance);
  if (positive_diagonal) {
    auto lowest_diagonal = stack.diagonal(0, 1, 2).amin(1, /*keepdim=*/true).unsqueeze(-1);
    admissible = admissible & (lowest_diagonal >= magnitude * -kTolerance);
  }
  return admissible;
}

at::Tensor acceptable_roots(const at::Tensor& roots, double epsilon, int64_t p) {
  if (epsilon <= 0.0) return finite_matrices(roots);
  return largest_magnitude(roots) <= 2.0 * std::pow(epsilon, -1.0 / static_cast<double>(p));
}

}  // namespace dash::linalg
