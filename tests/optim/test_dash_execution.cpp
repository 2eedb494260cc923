// Batched and sequential execution are the same math: after 20 steps the
// parameters agree for every root method.

#include <dash/option_names.h>
#include <dash/optimizer.h>

#include "support/solver_options.h"
#include "support/twin_steps.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include <functional>
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
          .root(
              dash::testing::solver_options(GetParam()).epsilon(1e-6).chebyshev(ChebyshevOptions().interval_min(1e-2)));
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
  auto root = dash::testing::solver_options(RootMethod::NewtonDB).epsilon(1e-6);
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

// The default NewtonDBEvaluation::Auto runs NewtonDB by eigh on a CPU in float32,
// bit for bit, and diagnostics() says so; with 16-bit matmuls it runs the iteration.
TEST(NewtonDBByEigh, IsTheDefaultOnACpuInFloat32) {
  ASSERT_EQ(DashOptions().root().method(), RootMethod::NewtonDB);
  ASSERT_EQ(DashOptions().root().newton_db().evaluation(), NewtonDBEvaluation::Auto);
  auto options = DashOptions(0.02).block_size(4).start_step(3).root_frequency(2);
  options.root().epsilon(1e-6);
  auto by_eigh = DashOptions(options);
  by_eigh.root().newton_db().evaluation(NewtonDBEvaluation::Eigh);
  const auto automatic = train(options);
  const auto eigh = train(by_eigh);
  for (size_t i = 0; i < automatic.size(); ++i) EXPECT_TRUE(at::equal(automatic[i], eigh[i])) << "parameter " << i;

  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16}) {
    auto param = at::randn({8, 6}).set_requires_grad(true);
    Dash optimizer({param}, DashOptions(options).root(InverseRootOptions(options.root()).precision(precision)));
    for (int t = 0; t < 3; ++t) {
      param.mutable_grad() = at::randn({8, 6});
      optimizer.step();
    }
    for (const auto& stack : optimizer.diagnostics().factor_stacks) {
      EXPECT_EQ(stack.newton_db_evaluation,
          precision == MatmulPrecision::FP32 ? NewtonDBEvaluation::Eigh : NewtonDBEvaluation::Matmuls)
          << to_string(precision);
    }
  }
}

// Copies of `params`, which (like the copies) are made to require gradients.
std::vector<at::Tensor> twins_of(std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> twins;
  for (auto& p : params) {
    p.set_requires_grad(true);
    twins.push_back(p.detach().clone().set_requires_grad(true));
  }
  return twins;
}

// How far each twin moved from what the parameter's move was, in a step that
// `step` takes: ‖twin move − move‖ / ‖move‖ per parameter; -1 where neither moved.
std::vector<double> move_differences(
    std::vector<at::Tensor>& params, std::vector<at::Tensor>& twins, const std::function<void()>& step) {
  std::vector<at::Tensor> before, twins_before;
  for (size_t i = 0; i < params.size(); ++i) {
    before.push_back(params[i].detach().clone());
    twins_before.push_back(twins[i].detach().clone());
  }
  step();
  std::vector<double> differences;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto move = params[i].detach() - before[i];
    const auto twin_move = twins[i].detach() - twins_before[i];
    const double norm = move.norm().item<double>();
    EXPECT_EQ(norm == 0.0, twin_move.norm().item<double>() == 0.0) << "parameter " << i << ": one moved alone";
    differences.push_back(norm == 0.0 ? -1.0 : (twin_move - move).norm().item<double>() / norm);
  }
  return differences;
}

// EVD roots from the first step on, recomputed every third step.
DashOptions preconditioning_test_options(Execution execution) {
  return DashOptions(0.1).block_size(8).start_step(1).root_frequency(3).execution(execution).root(
      dash::testing::solver_options(RootMethod::EVD).epsilon(1e-6));
}

// preconditioning_precision BF16 is the float32 step up to bfloat16's rounding of
// L̄ Ĝ R̄: on the same random gradients (so the same factors and roots in both)
// every step moves the parameters within 2 % of the float32 step, batched and one
// block at a time, also in the steps right after each root computation (rounded
// roots left over from the previous computation put them 70–94 % off). The first
// step, whose roots come from one gradient's nearly singular factors, is within
// 10 %: a product's rounding error is relative to |L̄| |Ĝ| |R̄|, which such roots
// make much larger than |L̄ Ĝ R̄| (measured: 3.9 % and 4.8 %, then 0.5–0.7 %). The
// lower bound shows the products were rounded.
TEST(PreconditioningPrecision, BFloat16StepsAreTheFloat32StepsRounded) {
  for (auto execution : {Execution::Batched, Execution::Sequential}) {
    const auto options = preconditioning_test_options(execution);
    auto generator = at::detail::createCPUGenerator(11);
    std::vector<at::Tensor> params = {at::randn({20, 13}, generator), at::randn({16, 16}, generator)};
    auto twins = twins_of(params);
    Dash float32(params, options);
    Dash bfloat16(twins, DashOptions(options).preconditioning_precision(MatmulPrecision::BF16));
    for (int t = 0; t < 10; ++t) {
      const auto differences =
          move_differences(params, twins, [&] { testing::step_twins(params, float32, twins, bfloat16, generator); });
      for (size_t i = 0; i < differences.size(); ++i) {
        EXPECT_LE(differences[i], t == 0 ? 0.1 : 2e-2)
            << to_string(execution) << " step " << t + 1 << " parameter " << i;
        EXPECT_GE(differences[i], 1e-4) << to_string(execution) << " step " << t + 1 << " parameter " << i;
      }
    }
  }
  try {
    Dash refused(
        {at::zeros({4, 4}).set_requires_grad(true)}, DashOptions().preconditioning_precision(MatmulPrecision::FP16));
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what_without_backtrace()).find("preconditioning_precision fp16 is not supported"),
        std::string::npos)
        << error.what_without_backtrace();
  }
}

// A group may switch its preconditioning precision between steps: in float32 its
// steps are the float32 optimizer's (up to the rounding of the parameters they
// are applied to), and back in bfloat16, after a root computation in between, its
// rounded roots are the new ones. One of two parameters that share a block stack
// has a gradient only every other step, so half the steps take the subset path
// (roots gathered for some blocks of the stack).
TEST(PreconditioningPrecision, SwitchesBetweenStepsAndTakesBlockSubsets) {
  const auto options = preconditioning_test_options(Execution::Batched);
  auto generator = at::detail::createCPUGenerator(12);
  std::vector<at::Tensor> params = {at::randn({16, 16}, generator), at::randn({16, 16}, generator)};
  auto twins = twins_of(params);
  Dash float32(params, options);
  Dash switching(twins, DashOptions(options).preconditioning_precision(MatmulPrecision::BF16));
  auto& switching_options = static_cast<DashOptions&>(switching.param_groups()[0].options());
  for (int t = 0; t < 12; ++t) {
    if (t == 5) switching_options.preconditioning_precision(MatmulPrecision::FP32);
    if (t == 8) switching_options.preconditioning_precision(MatmulPrecision::BF16);  // roots recomputed at t = 6
    const auto differences = move_differences(params, twins, [&] {
      for (size_t i = 0; i < params.size(); ++i) {
        const bool has_grad = i == 0 || t % 2 == 0;
        auto grad = at::randn(params[i].sizes(), generator);
        params[i].mutable_grad() = has_grad ? grad : at::Tensor();
        twins[i].mutable_grad() = has_grad ? grad.clone() : at::Tensor();
      }
      float32.step();
      switching.step();
    });
    const bool in_float32 = t >= 5 && t < 8;
    for (size_t i = 0; i < differences.size(); ++i) {
      if (differences[i] < 0.0) continue;  // no gradient, no move
      EXPECT_LE(differences[i], in_float32 ? 1e-5 : t == 0 ? 0.1 : 2e-2) << "step " << t + 1 << " parameter " << i;
      if (!in_float32) EXPECT_GE(differences[i], 1e-4) << "step " << t + 1 << " parameter " << i;
    }
  }
}

// Execution::Auto times each factor stack's roots at its second root computation
// and keeps the faster way; on a CPU both ways give bitwise the same roots, so the
// parameters equal a batched run's exactly, whatever it chose. The choice is in
// diagnostics() and survives a checkpoint.
TEST(ExecutionAuto, ChoosesPerStackAndMatchesBatchedBitwise) {
  auto options = DashOptions(0.02).block_size(4).start_step(2).root_frequency(3).root(
      dash::testing::solver_options(RootMethod::NewtonDB).epsilon(1e-6));
  ASSERT_EQ(DashOptions().execution(), Execution::Auto) << "the default";
  auto generator = at::detail::createCPUGenerator(5);
  std::vector<at::Tensor> params = {at::randn({10, 6}, generator), at::randn({8, 8}, generator)};
  auto twins = twins_of(params);
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
                     .root(dash::testing::solver_options(RootMethod::Auto).epsilon(1e-6));
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

INSTANTIATE_TEST_SUITE_P(AllMethods, ExecutionModes, ::testing::ValuesIn(kSolverMethods),
    [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace dash
