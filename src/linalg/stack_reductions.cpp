#include "linalg/stack_reductions.h"

#include <ATen/ATen.h>

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

}  // namespace dash::linalg
