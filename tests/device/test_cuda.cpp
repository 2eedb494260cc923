// The same code on CUDA: solvers and optimizer steps agree with the CPU. Skipped
// where no CUDA device is present (bench/gpu.sh runs it on one).

#include <dash/dash.h>

#include "support/spd_matrices.h"
#include "support/twin_steps.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

namespace dash {
namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  }
};

// CUDA's bmm/eigh sum in other orders than the CPU's (and run fp32 matmuls as
// TF32 where enabled): 1e-3 relative at κ = 1e2 is far below a wrong result.
TEST_F(Cuda, SolversMatchTheCpu) {
  auto spectrum = testing::log_spaced_spectrum(6, 64, 1e2, 7);
  auto cpu_input = spectrum.matrices.to(at::kFloat);
  auto cuda_input = cpu_input.to(at::kCUDA);
  for (auto method : {RootMethod::EVD, RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev}) {
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
      auto options = InverseRootOptions().method(method).precision(precision).chebyshev(
          ChebyshevOptions().interval_min(1.0 / 202));
      auto on_cuda = inverse_root_with_diagnostics(cuda_input, 4, options);
      ASSERT_TRUE(on_cuda.root.is_cuda());
      EXPECT_TRUE(on_cuda.finite.all().item<bool>());
      auto tolerance = precision == MatmulPrecision::FP32 ? 1e-3 : 5e-2;
      EXPECT_LE(testing::max_relative_error(on_cuda.root.cpu(), inverse_root(cpu_input, 4, options)), tolerance)
          << to_string(method) << " " << to_string(precision);
    }
  }
}

TEST_F(Cuda, OptimizerStepsMatchTheCpu) {
  auto generator = at::detail::createCPUGenerator(3);
  std::vector<at::Tensor> cpu = {
      at::randn({40, 24}, generator), at::randn({24}, generator), at::randn({8, 3, 3, 3}, generator)};
  std::vector<at::Tensor> cuda;
  for (auto& p : cpu) {
    cuda.push_back(p.to(at::kCUDA).set_requires_grad(true));
    p.set_requires_grad(true);
  }
  auto options = DashOptions(0.01).block_size(16).start_step(2).root_frequency(2).root(
      InverseRootOptions().method(RootMethod::EVD));
  Dash cpu_optimizer(cpu, options);
  Dash cuda_optimizer(cuda, options);
  for (int t = 0; t < 6; ++t) testing::step_twins(cpu, cpu_optimizer, cuda, cuda_optimizer, generator);
  for (size_t i = 0; i < cpu.size(); ++i) {
    auto difference = (cuda[i].detach().cpu() - cpu[i].detach()).abs().max().item<double>();
    EXPECT_LE(difference / cpu[i].detach().abs().max().item<double>(), 1e-3) << "parameter " << i;
  }
}

}  // namespace
}  // namespace dash
