// Batched and sequential execution are the same math: after 20 steps the
// parameters agree for every root method.

#include <dash/option_names.h>
#include <dash/optimizer.h>

#include "support/twin_steps.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include <iostream>
#include <memory>
#include <sstream>

namespace dash {
namespace {

std::vector<at::Tensor> train(const DashOptions& options, int steps = 20) {
  auto generator = at::detail::createCPUGenerator(3);
  // Ragged blocks (B = 4): 10×6, a conv-shaped 4-D weight, 1-D and 0-D parameters.
  std::vector<at::Tensor> params = {at::randn({10, 6}, generator), at::randn({3, 2, 2, 2}, generator),
      at::randn({9}, generator), at::randn({}, generator)};
  for (auto& p : params) p.set_requires_grad(true);
  Dash optimizer(params, options);
  auto targets = at::randn({10, 6}, generator);
  for (int t = 0; t < steps; ++t) {
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    // An ill-conditioned quadratic so that the preconditioner matters.
    params[0].mutable_grad() = (params[0].detach() - targets) * at::linspace(0.01, 1.0, 6).view({1, 6});
    params[1].mutable_grad() = params[1].detach() * 0.5 + at::randn({3, 2, 2, 2}, generator);
    params[2].mutable_grad() = params[2].detach() + at::randn({9}, generator);
    params[3].mutable_grad() = params[3].detach();
    optimizer.step();
  }
  std::vector<at::Tensor> result;
  for (auto& p : params) result.push_back(p.detach().clone());
  return result;
}

class ExecutionModes : public ::testing::TestWithParam<RootMethod> {};

// Relative difference ≤ 1e-4: the two modes run identical formulas, but a
// batched eigh/bmm may sum in another order than the one-matrix call, and 20
// steps of an ill-conditioned problem carry that forward. (EVD under LibTorch 2.6,
// on a loaded machine, once reached 1.8e-5, and 0 in 18 reruns; a wrong root is
// off by O(1).)
TEST_P(ExecutionModes, SequentialEqualsBatchedAfter20Steps) {
  auto options =
      DashOptions(0.02)
          .block_size(4)
          .start_step(3)
          .root_frequency(2)
          .one_dimensional(OneDimensional::Shampoo1D)
          .root(InverseRootOptions().method(GetParam()).epsilon(1e-6).chebyshev(ChebyshevOptions().interval_min(1e-2)));
  auto batched = train(options);
  auto sequential = train(DashOptions(options).execution(Execution::Sequential));
  for (size_t i = 0; i < batched.size(); ++i) {
    auto scale = batched[i].abs().max().item<double>();
    EXPECT_LE((batched[i] - sequential[i]).abs().max().item<double>() / scale, 1e-4) << "parameter " << i;
    EXPECT_TRUE(at::isfinite(batched[i]).all().item<bool>());
  }
}

// NewtonDB evaluated on the eigenvalues is the same optimizer as the matrix
// iteration: with Frobenius scaling (the same scale in both) the parameters agree
// after 20 steps up to float32 rounding carried forward; a different root would
// be off by O(1).
TEST(NewtonDBByEigh, TrainsAsTheMatrixIteration) {
  auto root = InverseRootOptions().method(RootMethod::NewtonDB).epsilon(1e-6);
  root.scaling().method(Scaling::Frobenius);
  auto options = DashOptions(0.02).block_size(4).start_step(3).root_frequency(2).root(root);
  auto matmuls = train(options);
  root.newton_db().evaluation(NewtonDBEvaluation::Eigh);
  auto by_eigh = train(DashOptions(options).root(root));
  for (size_t i = 0; i < matmuls.size(); ++i) {
    auto scale = matmuls[i].abs().max().item<double>();
    EXPECT_LE((matmuls[i] - by_eigh[i]).abs().max().item<double>() / scale, 1e-3) << "parameter " << i;
    EXPECT_TRUE(at::isfinite(by_eigh[i]).all().item<bool>());
  }
}

// Execution::Auto times each factor stack's roots at its second root computation
// and keeps the faster way; on a CPU both ways give bitwise the same roots, so the
// parameters equal a batched run's exactly, whatever it chose. The choice is in
// diagnostics() and survives a checkpoint.
TEST(ExecutionAuto, ChoosesPerStackAndMatchesBatchedBitwise) {
  auto options = DashOptions(0.02).block_size(4).start_step(2).root_frequency(3).root(
      InverseRootOptions().method(RootMethod::NewtonDB).epsilon(1e-6));
  ASSERT_EQ(DashOptions().execution(), Execution::Auto) << "the default";
  auto generator = at::detail::createCPUGenerator(5);
  std::vector<at::Tensor> params = {at::randn({10, 6}, generator), at::randn({8, 8}, generator)};
  std::vector<at::Tensor> twins;
  for (auto& p : params) {
    p.set_requires_grad(true);
    twins.push_back(p.detach().clone().set_requires_grad(true));
  }
  Dash automatic(params, DashOptions(options).execution(Execution::Auto));
  Dash batched(twins, DashOptions(options).execution(Execution::Batched));
  auto step_both = [&] { testing::step_twins(params, automatic, twins, batched, generator); };
  for (int t = 0; t < 2; ++t) step_both();  // one root computation: not timed yet
  for (const auto& stack : automatic.diagnostics().factor_stacks) EXPECT_EQ(stack.execution, Execution::Auto);
  for (int t = 0; t < 6; ++t) step_both();  // two more root computations
  for (const auto& stack : automatic.diagnostics().factor_stacks) {
    EXPECT_TRUE(stack.execution == Execution::Batched || stack.execution == Execution::Sequential);
    EXPECT_GT(stack.calibrated_batched_ms, 0.0);
    EXPECT_GT(stack.calibrated_per_block_ms, 0.0);
    const bool per_block_faster = stack.calibrated_per_block_ms * 1.1 < stack.calibrated_batched_ms;
    EXPECT_EQ(stack.execution, per_block_faster ? Execution::Sequential : Execution::Batched);
    std::cout << "factor stack " << stack.size << "x" << stack.size << " (" << stack.count
              << "): " << to_string(stack.execution) << ", batched " << stack.calibrated_batched_ms << " ms, per block "
              << stack.calibrated_per_block_ms << " ms\n";
  }
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(params[i], twins[i])) << "parameter " << i;
  // The choices are saved: a copy loaded from a checkpoint reports them without timing again.
  torch::serialize::OutputArchive archive;
  automatic.save(archive);
  std::stringstream stream;
  archive.save_to(stream);
  torch::serialize::InputArchive loaded_archive;
  loaded_archive.load_from(stream);
  Dash restored(params, DashOptions(options).execution(Execution::Auto));
  restored.load(loaded_archive);
  const auto before = automatic.diagnostics().factor_stacks;
  const auto after = restored.diagnostics().factor_stacks;
  ASSERT_EQ(before.size(), after.size());
  for (size_t k = 0; k < before.size(); ++k) EXPECT_EQ(after[k].execution, before[k].execution) << "stack " << k;
}

// RootMethod::Auto compares the methods at a stack's first root computation and
// then computes every root with the one it chose: the parameters equal, bit for
// bit, a run configured with that method from the start. The choice (not the
// trials) survives a checkpoint, and a restored optimizer does not compare again.
// (Batched execution: Execution::Auto's timed choice between batched and per-matrix
// eigh could differ between the two runs, and LibTorch 2.x's two eigh paths round
// differently.)
TEST(RootMethodAuto, ChoosesOnceAndThenMatchesTheChosenMethodBitwise) {
  auto options = DashOptions(0.02)
                     .block_size(16)
                     .start_step(2)
                     .root_frequency(3)
                     .execution(Execution::Batched)
                     .root(InverseRootOptions().method(RootMethod::Auto).epsilon(1e-6));
  auto run = [&](const DashOptions& run_options, std::unique_ptr<Dash>& optimizer, at::Tensor& param) {
    auto generator = at::detail::createCPUGenerator(7);
    param = at::randn({16, 16}, generator).set_requires_grad(true);
    optimizer = std::make_unique<Dash>(std::vector<at::Tensor>{param}, run_options);
    auto targets = at::randn({16, 16}, generator);
    for (int t = 0; t < 8; ++t) {
      param.mutable_grad() =
          (param.detach() - targets) * at::linspace(0.01, 1.0, 16).view({1, 16}) + 0.1 * at::randn({16, 16}, generator);
      optimizer->step();
    }
  };
  std::unique_ptr<Dash> automatic, fixed;
  at::Tensor auto_param, fixed_param;
  run(options, automatic, auto_param);
  const auto stacks = automatic->diagnostics().factor_stacks;
  ASSERT_EQ(stacks.size(), 1u);
  const auto chosen = stacks[0].root_method;
  ASSERT_NE(chosen, RootMethod::Auto);
  ASSERT_EQ(stacks[0].root_method_trials.size(), 4u);
  for (const auto& trial : stacks[0].root_method_trials) {
    std::cout << to_string(trial.method) << ": " << trial.milliseconds << " ms, error " << trial.error << "\n";
    if (trial.method == chosen) EXPECT_TRUE(trial.meets_accuracy);
  }
  auto fixed_options = DashOptions(options);
  fixed_options.root().method(chosen);
  run(fixed_options, fixed, fixed_param);
  EXPECT_TRUE(at::equal(auto_param, fixed_param)) << "chosen " << to_string(chosen);
  EXPECT_TRUE(fixed->diagnostics().factor_stacks[0].root_method_trials.empty()) << "no comparison without Auto";

  torch::serialize::OutputArchive archive;
  automatic->save(archive);
  std::stringstream stream;
  archive.save_to(stream);
  torch::serialize::InputArchive loaded_archive;
  loaded_archive.load_from(stream);
  auto twin = auto_param.detach().clone().set_requires_grad(true);
  Dash restored({twin}, options);
  restored.load(loaded_archive);
  EXPECT_EQ(restored.diagnostics().factor_stacks[0].root_method, chosen);
  auto generator = at::detail::createCPUGenerator(8);
  std::vector<at::Tensor> params = {auto_param}, twins = {twin};
  for (int t = 0; t < 4; ++t) testing::step_twins(params, *automatic, twins, restored, generator);
  EXPECT_TRUE(at::equal(auto_param, twin));
  EXPECT_TRUE(restored.diagnostics().factor_stacks[0].root_method_trials.empty()) << "compared again after loading";
}

INSTANTIATE_TEST_SUITE_P(AllMethods, ExecutionModes,
    ::testing::Values(RootMethod::EVD, RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev),
    [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace dash
