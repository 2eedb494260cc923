// The same code on CUDA: solvers and optimizer steps agree with the CPU. Skipped
// where no CUDA device is present (bench/gpu.sh runs it on one).

#include <dash/dash.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"
#include "support/twin_steps.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace dash {
namespace {

bool cuda_present() { return at::hasCUDA(); }

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_present()) GTEST_SKIP() << "no CUDA device";
  }
};

// CUDA's bmm/eigh sum in other orders than the CPU's (and run fp32 matmuls as
// TF32 where enabled): 1e-3 relative at κ = 1e2 is far below a wrong result.
TEST_F(Cuda, SolversMatchTheCpu) {
  auto spectrum = testing::log_spaced_spectrum(6, 64, 1e2, 7);
  auto cpu_input = spectrum.matrices.to(at::kFloat);
  auto cuda_input = cpu_input.to(at::kCUDA);
  for (auto method : kSolverMethods) {
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
      auto options = dash::testing::solver_options(method).precision(precision).chebyshev(
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

// A root configuration and how closely a CUDA run must follow the CPU's.
struct StepCase {
  std::string name;
  InverseRootOptions root;
  double tolerance;
  MatmulPrecision preconditioning = MatmulPrecision::FP32;
  MatmulPrecision state = MatmulPrecision::FP32;  ///< factor_, root_ and moment_precision
};

// Test names show the case's name, not its bytes.
void PrintTo(const StepCase& test_case, std::ostream* out) { *out << test_case.name; }

class CudaSteps : public ::testing::TestWithParam<StepCase> {
 protected:
  void SetUp() override {
    if (!cuda_present()) GTEST_SKIP() << "no CUDA device";
  }
};

// Twin optimizers on twin parameters (a tiled matrix, a vector, a conv kernel),
// stepped on the same gradients through three root computations. What is compared
// is the distance each parameter moved, relative to the largest move: the
// parameters themselves are dominated by their initial values.
TEST_P(CudaSteps, MatchTheCpu) {
  const auto& test_case = GetParam();
  auto generator = at::detail::createCPUGenerator(3);
  std::vector<at::Tensor> cpu = {
      at::randn({40, 24}, generator), at::randn({24}, generator), at::randn({8, 3, 3, 3}, generator)};
  std::vector<at::Tensor> initial, cuda;
  for (auto& p : cpu) {
    initial.push_back(p.clone());
    cuda.push_back(p.to(at::kCUDA).set_requires_grad(true));
    p.set_requires_grad(true);
  }
  auto options = DashOptions(0.01)
                     .block_size(16)
                     .start_step(2)
                     .root_frequency(2)
                     .root(test_case.root)
                     .preconditioning_precision(test_case.preconditioning)
                     .factor_precision(test_case.state)
                     .root_precision(test_case.state)
                     .moment_precision(test_case.state);
  Dash cpu_optimizer(cpu, options);
  Dash cuda_optimizer(cuda, options);
  for (int t = 0; t < 6; ++t) testing::step_twins(cpu, cpu_optimizer, cuda, cuda_optimizer, generator);
  for (size_t i = 0; i < cpu.size(); ++i) {
    const auto cpu_move = cpu[i].detach() - initial[i];
    const auto cuda_move = cuda[i].detach().cpu() - initial[i];
    ASSERT_TRUE(at::isfinite(cuda_move).all().item<bool>()) << "parameter " << i;
    const double largest = cpu_move.abs().max().item<double>();
    ASSERT_GT(largest, 0.0) << "parameter " << i << " did not move";
    EXPECT_LE((cuda_move - cpu_move).abs().max().item<double>() / largest, test_case.tolerance) << "parameter " << i;
  }
  // Every factor stack computed its roots without a failure, with the method asked
  // for (or, for Auto, one it chose); warm eigenbases were kept or warm-started.
  const auto stacks = cuda_optimizer.diagnostics().factor_stacks;
  ASSERT_FALSE(stacks.empty());
  int64_t kept_or_warm = 0;
  for (const auto& stack : stacks) {
    EXPECT_EQ(stack.failures, 0);
    kept_or_warm += stack.roots_kept + stack.roots_warm_started;
    if (test_case.root.method() == RootMethod::Auto) {
      EXPECT_NE(stack.root_method, RootMethod::Auto) << "no method chosen";
    } else {
      EXPECT_EQ(stack.root_method, test_case.root.method());
    }
  }
  if (test_case.root.eigen().refresh_tolerance() > 0.0) {
    EXPECT_GT(kept_or_warm, 0) << "every root was an eigh: the warm path was not exercised";
  }
}

// Every solver at its defaults, then the variants that take other paths.
std::vector<StepCase> step_cases() {
  std::vector<StepCase> cases;
  for (auto method : kSolverMethods) cases.push_back({to_string(method), dash::testing::solver_options(method), 1e-3});
  const auto evd = dash::testing::solver_options(RootMethod::EVD);
  const auto ndb = dash::testing::solver_options(RootMethod::NewtonDB);
  const auto cn = dash::testing::solver_options(RootMethod::CoupledNewton);
  cases.push_back({"evd_warm", InverseRootOptions(evd).eigen(EigenOptions().refresh_tolerance(0.05)), 1e-3});
  cases.push_back(
      {"ndb_by_eigh", InverseRootOptions(ndb).newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Eigh)), 1e-3});
  cases.push_back({"cn_fro", InverseRootOptions(cn).scaling(SpectralScaleOptions().method(Scaling::Frobenius)), 1e-3});
  cases.push_back({"evd_preconditioning_bf16", evd, 3e-2, MatmulPrecision::BF16});
  cases.push_back({"ndb_bf16", InverseRootOptions(ndb).precision(MatmulPrecision::BF16), 5e-2});
  cases.push_back({"cn_fp16", InverseRootOptions(cn).precision(MatmulPrecision::FP16), 5e-2});
  cases.push_back({"ndb_bf16_state", ndb, 3e-2, MatmulPrecision::FP32, MatmulPrecision::BF16});
  cases.push_back({"auto", dash::testing::solver_options(RootMethod::Auto), 0.2});
  return cases;
}

// fp32 paths agree to rounding; 16-bit ones to their precision. Auto may choose
// another method on CUDA than on the CPU (it times them on the device), so its
// bound is the gap between methods that meet its accuracy target.
INSTANTIATE_TEST_SUITE_P(RootConfigurations, CudaSteps, ::testing::ValuesIn(step_cases()),
    [](const ::testing::TestParamInfo<StepCase>& info) { return info.param.name; });

// A checkpoint written on CUDA resumes on CUDA exactly where the run left off.
// The default NewtonDBEvaluation::Auto runs NewtonDB's matmul iteration on a GPU,
// where the same options on a CPU evaluate it by eigh.
TEST_F(Cuda, DefaultNewtonDBRunsItsMatmulIteration) {
  auto options = DashOptions(0.01).block_size(16).start_step(1).root_frequency(1);
  auto root_on = [&](const at::Device& device) {
    auto param = at::randn({40, 24}).to(device).set_requires_grad(true);
    Dash optimizer({param}, options);
    param.mutable_grad() = at::randn({40, 24}).to(device);
    optimizer.step();
    return optimizer.diagnostics().factor_stacks.at(0).newton_db_evaluation;
  };
  EXPECT_EQ(root_on(at::Device(at::kCUDA)), NewtonDBEvaluation::Matmuls);
  EXPECT_EQ(root_on(at::Device(at::kCPU)), NewtonDBEvaluation::Eigh);
}

TEST_F(Cuda, CheckpointResumesBitForBit) {
  auto generator = at::detail::createCPUGenerator(5);
  auto make_params = [&] {
    return std::vector<at::Tensor>{at::randn({40, 24}, generator).to(at::kCUDA).set_requires_grad(true)};
  };
  auto run = make_params();
  auto resumed = std::vector<at::Tensor>{run[0].detach().clone().set_requires_grad(true)};
  auto options = DashOptions(0.01).block_size(16).start_step(2).root_frequency(2).root(
      dash::testing::solver_options(RootMethod::EVD).eigen(EigenOptions().refresh_tolerance(0.05)));
  Dash optimizer(run, options);
  auto step_with = [](std::vector<at::Tensor>& params, Dash& dash, const at::Tensor& grad) {
    params[0].mutable_grad() = grad.to(at::kCUDA);
    dash.step();
  };
  std::vector<at::Tensor> grads;
  for (int t = 0; t < 8; ++t) grads.push_back(at::randn({40, 24}, generator));
  for (int t = 0; t < 5; ++t) step_with(run, optimizer, grads[t]);

  std::stringstream checkpoint;
  torch::save(optimizer, checkpoint);
  resumed[0].detach().copy_(run[0].detach());
  Dash restored(resumed, options);
  torch::load(restored, checkpoint);
  for (int t = 5; t < 8; ++t) {
    step_with(run, optimizer, grads[t]);
    step_with(resumed, restored, grads[t]);
  }
  EXPECT_TRUE(at::equal(run[0].detach(), resumed[0].detach()));
  int64_t kept_or_warm = 0;
  for (const auto& stack : restored.diagnostics().factor_stacks) {
    kept_or_warm += stack.roots_kept + stack.roots_warm_started;
  }
  EXPECT_GT(kept_or_warm, 0) << "no root used a saved eigenbasis: a lost one would go unnoticed";
}

}  // namespace
}  // namespace dash
