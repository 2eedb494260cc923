#include "optim/families/shampoo_arithmetic.h"

#include "kernels/stack_blas.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash::optim {

void accumulate_factor(at::Tensor& factor, const at::Tensor& grad, bool left, double beta) {
  const double weight = beta < 1.0 ? 1.0 - beta : 1.0;
  // A factor is symmetric: where a CPU BLAS can form one triangle, it does half
  // the multiply-adds (docs/experiments/2026-12-03-step-floor.md, "Factor updates with syrk").
  if (kernels::stack_syrk_supported(factor, grad)) {
    kernels::stack_syrk(factor, grad, /*transpose_a=*/!left, weight, beta);
    return;
  }
  auto transposed = grad.transpose(1, 2);
  if (left) {
    factor.baddbmm_(grad, transposed, beta, weight);
  } else {
    factor.baddbmm_(transposed, grad, beta, weight);
  }
}

at::Tensor shampoo_direction(Workspace& work, const at::Tensor& left_root, const at::Tensor& right_root) {
  if (left_root.scalar_type() == work.ghat.scalar_type()) {
    kernels::stack_bmm_out(work.product, left_root, work.ghat);
    return right_root.defined() ? kernels::stack_bmm_out(work.direction, work.product, right_root) : work.product;
  }
  TORCH_CHECK(work.ghat_operand.defined() && work.ghat_operand.scalar_type() == left_root.scalar_type() &&
                  work.product_operand.defined() && work.product_operand.scalar_type() == left_root.scalar_type(),
      "dash: shampoo_direction: roots in ", left_root.scalar_type(), " need operand buffers of that dtype");
  // Ĝ is dead once rounded, so U (float32) goes into its buffer, work.direction.
  work.ghat_operand.copy_(work.ghat);
  kernels::stack_bmm_out(work.product_operand, left_root, work.ghat_operand);
  const auto& rounded = right_root.defined()
                            ? kernels::stack_bmm_out(work.ghat_operand, work.product_operand, right_root)
                            : work.product_operand;
  return work.direction.copy_(rounded);
}

}  // namespace dash::optim
