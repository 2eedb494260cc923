#include "optim/gradient_chunk_bytes.h"

#include "linalg/batched_matmul.h"
#include "optim/state_precision.h"

#include <algorithm>

namespace dash::optim {

int64_t gradient_chunk_bytes_per_block(
    const blocking::GradientStack& stack, const DashOptions& options, const MomentState& moments, bool stack_complete) {
  const int64_t block = 4 * stack.rows * stack.cols;
  const int64_t factors = 4 * (stack.rows * stack.rows + (stack.one_sided ? 0 : stack.cols * stack.cols));
  const auto precision = options.preconditioning_precision();
  const auto operand_dtype = linalg::operand_dtype(precision, at::kFloat);
  int64_t direction = 3 * block;
  if (precision != MatmulPrecision::FP32) direction += block;
  if (operand_dtype != state_dtype(options.root_precision())) {
    direction += factors * static_cast<int64_t>(c10::elementSize(operand_dtype)) / 4;
  }
  if (options.moment_precision() != MatmulPrecision::FP32) {
    direction += block * (1 + (moments.graft_stat.defined() ? 1 : 0) + (moments.momentum.defined() ? 1 : 0));
  }
  int64_t factor_update = block;
  if (options.factor_precision() != MatmulPrecision::FP32) factor_update += factors;
  if (!stack_complete) {
    direction += 3 * block + factors;
    factor_update += factors;
  }
  return std::max(direction, factor_update);
}

}  // namespace dash::optim
