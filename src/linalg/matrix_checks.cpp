#include "linalg/matrix_checks.h"

#include <c10/util/Exception.h>

namespace dash::linalg {

void check_square_stack(const at::Tensor& matrices, const char* caller) {
  TORCH_CHECK(matrices.defined(), caller, ": the input tensor is undefined");
  TORCH_CHECK(matrices.dim() == 2 || matrices.dim() == 3, caller,
      ": expected a (b, b) matrix or an (N, b, b) stack, got a tensor with ", matrices.dim(), " dimensions ",
      matrices.sizes());
  TORCH_CHECK(
      matrices.size(-1) == matrices.size(-2), caller, ": matrices must be square, got shape ", matrices.sizes());
  TORCH_CHECK(at::isFloatingType(matrices.scalar_type()), caller, ": expected a floating-point tensor, got ",
      matrices.scalar_type());
}

}  // namespace dash::linalg
