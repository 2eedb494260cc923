#include "optim/gradient_chunk_bytes.h"

#include <algorithm>

namespace dash::optim {

int64_t gradient_chunk_bytes_per_block(const blocking::GradientStack& stack, const DashOptions& options,
    const MomentState& moments, bool stack_complete, const ChunkBytes& family) {
  const int64_t block = 4 * stack.rows * stack.cols;
  int64_t direction = 3 * block;
  if (options.preconditioning_precision() != MatmulPrecision::FP32) direction += block;
  if (options.moment_precision() != MatmulPrecision::FP32) {
    direction += block * (1 + (moments.graft_stat.defined() ? 1 : 0) + (moments.momentum.defined() ? 1 : 0));
  }
  if (!stack_complete) direction += 3 * block;
  const int64_t statistics = block;
  return std::max(direction + family.direction, statistics + family.statistics);
}

}  // namespace dash::optim
