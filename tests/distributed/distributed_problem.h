#pragma once

// The optimization problem the distributed tests run both in one process and on
// several ranks: fixed shapes, seeded parameters, and gradients that are a pure
// function of the step, so every process sees the same ones.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <vector>

namespace dash::testing {

/// Blocks of several shapes at block size 32 (full and edge blocks, two factor
/// sizes), a 1-D Shampoo-free vector and a scalar for the AdamW segment.
inline std::vector<std::vector<int64_t>> distributed_problem_shapes(bool tiny) {
  if (tiny) return {{8, 8}, {5}};
  return {{70, 40}, {32, 32}, {48, 20}, {16}, {64, 32}, {}};
}

inline std::vector<at::Tensor> distributed_problem_parameters(bool tiny) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  std::vector<at::Tensor> params;
  for (const auto& shape : distributed_problem_shapes(tiny)) {
    params.push_back(at::randn(shape, generator, at::kFloat).set_requires_grad(true));
  }
  return params;
}

inline void set_distributed_problem_gradients(const std::vector<at::Tensor>& params, int64_t step) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  for (const auto& param : params) {
    // Gradient of ½‖p‖² plus seeded noise: the parameters move towards 0 with jitter.
    auto grad = param.detach() + 0.5 * at::randn(param.sizes(), generator, at::kFloat);
    param.mutable_grad() = grad;
  }
}

inline DashOptions distributed_problem_options() {
  return DashOptions(0.05).block_size(32).start_step(2).root_frequency(3).weight_decay(0.01);
}

inline constexpr int64_t kDistributedProblemSteps = 10;

}  // namespace dash::testing
