#include "linalg/stack_reductions.h"

#include <ATen/ATen.h>

namespace dash::linalg {

at::Tensor largest_magnitude(const at::Tensor& stack) {
  return at::maximum(stack.amax({1, 2}, /*keepdim=*/true), stack.amin({1, 2}, /*keepdim=*/true).neg());
}

at::Tensor finite_matrices(const at::Tensor& stack) {
  return at::isfinite(stack.amax({1, 2}, /*keepdim=*/true)) & at::isfinite(stack.amin({1, 2}, /*keepdim=*/true));
}

}  // namespace dash::linalg
