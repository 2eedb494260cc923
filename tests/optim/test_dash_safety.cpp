// Numerical safety and input checks of dash::Dash.

#include <dash/option_names.h>
#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <ATen/CPUGeneratorImpl.h>
#include "support/captured_warnings.h"
#include "support/error_message.h"
#include "support/solver_options.h"
#include "support/twin_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dash {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using testing::error_of;

DashOptions preconditioned_from_step_one(RootMethod method) {
  return DashOptions(0.01).block_size(4).start_step(1).root_frequency(1).root(dash::testing::solver_options(method));
}

// Finite gradients never give non-finite parameters: zero gradients, scales from
// 1e-20 to 1e20 (at 1e20 G Gᵀ would overflow float32: those steps are skipped),
// and rank-1 gradients, for every root method.
TEST(DashSafety, FiniteGradientsKeepParametersFinite) {
  auto generator = at::detail::createCPUGenerator(11);
  for (auto method : kSolverMethods) {
    for (double scale : {0.0, 1e-20, 1e-10, 1.0, 1e10, 1e20}) {
      auto param = at::randn({6, 5}, generator).set_requires_grad(true);
      Dash optimizer({param}, preconditioned_from_step_one(method));
      for (int t = 0; t < 4; ++t) {
        auto rank_one = at::outer(at::randn({6}, generator), at::randn({5}, generator));
        param.mutable_grad() = (t % 2 == 0 ? rank_one : at::randn({6, 5}, generator)) * scale;
        optimizer.step();
      }
      EXPECT_TRUE(at::isfinite(param).all().item<bool>())
          << "method " << static_cast<int>(method) << " scale " << scale;
    }
  }
}

// A 16-bit Newton iteration can diverge on an ill-conditioned factor, and some of
// its roots come out finite but huge (1e26 and more; the bound is 2·ε^{-1/p}). Taken
// as roots they made the update Inf and the parameters NaN (first seen in dash-train,
// bf16 NDB, at the first root step). NDB no longer diverges there (its 16-bit
// regularisation floor); bf16 coupled Newton still does on a factor whose spectrum
// is two clusters, half of it at 1e-4 of the rest (reproduced here with a 128² block
// whose gradient has singular values 1 and 1e-2). Such roots count as failed roots
// instead, and the previous roots stay.
TEST(DashSafety, DivergedFiniteRootsAreFailuresNotUpdates) {
  auto generator = at::detail::createCPUGenerator(13);
  auto [u, r_u] = at::linalg_qr(at::randn({128, 128}, generator));
  auto [v, r_v] = at::linalg_qr(at::randn({128, 128}, generator));
  auto singular_values = at::cat({at::ones({64}), at::full({64}, 1e-2)});
  const auto gradient = at::matmul(u * singular_values, v.transpose(0, 1));
  auto param = at::randn({128, 128}, generator).set_requires_grad(true);
  Dash optimizer(
      {param}, DashOptions(0.01).block_size(128).start_step(1).root_frequency(1).root(
                   dash::testing::solver_options(RootMethod::CoupledNewton).precision(MatmulPrecision::BF16)));
  for (int t = 0; t < 3; ++t) {
    param.mutable_grad() = gradient.clone();
    optimizer.step();
    ASSERT_TRUE(at::isfinite(param).all().item<bool>()) << "step " << t + 1;
  }
  int64_t failures = 0;
  for (const auto& stack : optimizer.diagnostics().factor_stacks) failures += stack.failures;
  EXPECT_GT(failures, 0);  // the divergence happened, and was counted
}

// Not just finite: on a quadratic with a known minimum, ½‖W − T‖² with gradients
// scaled by s, the (scale-free) Adam-grafted steps make progress at every scale
// whose squares float32 holds and where ε_graft does not dominate (s ≫ 1e-8), for
// every root method. An optimizer that did nothing would pass the test above.
TEST(DashSafety, ScaledGradientsStillReachAKnownMinimum) {
  auto generator = at::detail::createCPUGenerator(12);
  for (auto method : kSolverMethods) {
    for (double scale : {1e-4, 1.0, 1e10}) {
      auto target = at::randn({6, 5}, generator);
      auto param = at::zeros({6, 5}).set_requires_grad(true);
      Dash optimizer({param}, preconditioned_from_step_one(method).lr(0.05));
      const double start = (param.detach() - target).norm().item<double>();
      for (int t = 0; t < 60; ++t) {
        param.mutable_grad() = (param.detach() - target) * scale;
        optimizer.step();
      }
      const double end = (param.detach() - target).norm().item<double>();
      EXPECT_LT(end, 0.25 * start) << "method " << static_cast<int>(method) << " scale " << scale << ": distance "
                                   << start << " -> " << end;
    }
  }
}

// A root that comes out non-finite keeps the previous one and is counted: zero
// factors with ε = 0 have the eigenvalue 0 to invert.
TEST(DashSafety, FailedRootsAreCountedAndKept) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  auto options = preconditioned_from_step_one(RootMethod::EVD);
  options.root().epsilon(0.0);
  Dash optimizer({param}, options);
  param.mutable_grad() = at::zeros({4, 4});
  optimizer.step();
  auto diagnostics = optimizer.diagnostics();
  ASSERT_EQ(diagnostics.factor_stacks.size(), 1u);
  EXPECT_EQ(diagnostics.factor_stacks[0].failures, 2);  // L and R of the one block
  EXPECT_EQ(diagnostics.factor_stacks[0].factor_resets, 0);
  EXPECT_TRUE(at::isfinite(param).all().item<bool>());
}

// A finite gradient whose squares would overflow the float32 statistics skips
// the step: nothing changes, and the skip is counted.
TEST(DashSafety, OverflowingGradientSkipsTheStep) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, preconditioned_from_step_one(RootMethod::NewtonDB));
  param.mutable_grad() = at::full({4, 4}, 1e20f);
  optimizer.step();
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4})));
  auto diagnostics = optimizer.diagnostics();
  EXPECT_EQ(diagnostics.overflow_skipped_steps, 1);
  EXPECT_EQ(diagnostics.skipped_steps, 0);
  EXPECT_EQ(diagnostics.steps_taken, 0);
  EXPECT_EQ(diagnostics.factor_stacks[0].failures, 0);
}

// Extreme but finite gradients (1e±20 … 1e±38, alone and mixed), then ordinary
// ones: training still reaches the known minimum of ½‖W − T‖², for every root
// method. Before the overflow guard, 1e20 filled the factors and the Adam
// statistic with Inf: every later root failed and the grafted step was 0.
TEST(DashSafety, TrainingRecoversFromExtremeGradients) {
  const std::vector<std::vector<double>> sequences = {{1e20}, {1e25}, {1e30}, {1e38}, {1e-20}, {1e-25}, {1e-30},
      {1e-38}, {1e38, 1e-38, 1e20, 1e-20, 1.0, 1e30, 1e-30, 1e19, 1e-19}};
  auto generator = at::detail::createCPUGenerator(13);
  for (auto method : kSolverMethods) {
    for (const auto& scales : sequences) {
      auto target = at::randn({6, 5}, generator);
      auto param = at::zeros({6, 5}).set_requires_grad(true);
      Dash optimizer({param}, preconditioned_from_step_one(method).lr(0.05));
      const double start = (param.detach() - target).norm().item<double>();
      int64_t overflowing = 0;
      for (double scale : scales) {
        for (int t = 0; t < 5; ++t) {
          auto direction = param.detach() - target;
          // Largest entry exactly `scale`, computed in double: 1e38 is near FLT_MAX.
          param.mutable_grad() =
              (direction.to(at::kDouble) / direction.abs().max().to(at::kDouble) * scale).to(at::kFloat);
          optimizer.step();
        }
        overflowing += scale > 1e18 ? 5 : 0;
      }
      for (int t = 0; t < 60; ++t) {
        param.mutable_grad() = param.detach() - target;
        optimizer.step();
      }
      const double end = (param.detach() - target).norm().item<double>();
      const auto what = "method " + std::to_string(static_cast<int>(method)) + ", first scale " +
                        std::to_string(scales.front()) + ", " + std::to_string(scales.size()) + " scales";
      EXPECT_LT(end, 0.25 * start) << what << ": distance " << start << " -> " << end;
      EXPECT_EQ(optimizer.diagnostics().overflow_skipped_steps, overflowing) << what;
    }
  }
}

// Gradients just under the limit, every step: the statistics stay finite and the
// roots usable, for every root method (the margin the limit leaves is enough for
// the solvers' spectral scaling).
TEST(DashSafety, GradientsJustUnderTheLimitAreUsed) {
  for (auto method : kSolverMethods) {
    auto param = at::zeros({8, 6}).set_requires_grad(true);
    Dash optimizer({param}, preconditioned_from_step_one(method).block_size(8));
    const float limit = 4.6e18f / 8.0f;
    for (int t = 0; t < 12; ++t) {
      param.mutable_grad() = at::full({8, 6}, 0.9f * limit) * at::randn({8, 6}).sign();
      const auto before = param.detach().clone();
      optimizer.step();
      EXPECT_FALSE(at::equal(param.detach(), before)) << to_string(method) << " step " << t;
    }
    auto diagnostics = optimizer.diagnostics();
    EXPECT_EQ(diagnostics.overflow_skipped_steps, 0) << to_string(method);
    EXPECT_EQ(diagnostics.factor_stacks[0].failures, 0) << to_string(method);
    EXPECT_TRUE(at::isfinite(param).all().item<bool>()) << to_string(method);
  }
}

// Plain sums of the factors (β_LR = 1) of gradients just under the limit grow
// towards overflow: a factor past FLT_MAX/(16 b) restarts from zero before the
// solvers' scale could overflow (which made exact-zero roots, and zero steps), so
// every step moves the parameter and no root fails (with the bounded-failure
// policy at 2 the run never raises).
TEST(DashSafety, OverflowingFactorsRestartFromZero) {
  auto param = at::zeros({4, 4}).set_requires_grad(true);
  Dash optimizer(
      {param}, preconditioned_from_step_one(RootMethod::NewtonDB).beta_factor(1.0).max_consecutive_root_failures(2));
  for (int t = 0; t < 120; ++t) {
    param.mutable_grad() = at::full({4, 4}, 1e18f);  // limit for 4 × 4 blocks: 1.15e18
    const auto before = param.detach().clone();
    optimizer.step();
    EXPECT_FALSE(at::equal(param.detach(), before)) << "step " << t;
  }
  auto diagnostics = optimizer.diagnostics();
  EXPECT_EQ(diagnostics.overflow_skipped_steps, 0);
  EXPECT_GE(diagnostics.factor_stacks[0].factor_resets, 2);  // L and R, at least once
  EXPECT_EQ(diagnostics.factor_stacks[0].failures, 0);
  EXPECT_TRUE(at::isfinite(param).all().item<bool>());
}

// NonFiniteGradients::Unchecked checks nothing, as torch.optim's optimizers: finite
// gradients give bitwise the steps of the checking policies (root steps included),
// a finite gradient above the overflow bound is not skipped, and a NaN gradient is
// neither refused nor skipped: it reaches the parameter.
TEST(DashSafety, UncheckedGradientsStepAsCheckedOnesAndLetANanThrough) {
  auto generator = at::detail::createCPUGenerator(8);
  auto checked = at::randn({12, 10}, generator).set_requires_grad(true);
  auto vector = at::randn({6}, generator).set_requires_grad(true);
  auto unchecked = checked.detach().clone().set_requires_grad(true);
  auto unchecked_vector = vector.detach().clone().set_requires_grad(true);
  const auto options = DashOptions(0.05).block_size(4).start_step(2).root_frequency(3);
  Dash reference({checked, vector}, options);
  Dash optimizer(
      {unchecked, unchecked_vector}, DashOptions(options).non_finite_gradients(NonFiniteGradients::Unchecked));
  for (int t = 0; t < 9; ++t) {
    const auto g = at::randn({12, 10}, generator);
    const auto h = at::randn({6}, generator);
    checked.mutable_grad() = g;
    vector.mutable_grad() = h;
    unchecked.mutable_grad() = g.clone();
    unchecked_vector.mutable_grad() = h.clone();
    reference.step();
    optimizer.step();
  }
  EXPECT_TRUE(at::equal(unchecked.detach(), checked.detach()));
  EXPECT_TRUE(at::equal(unchecked_vector.detach(), vector.detach()));
  unchecked.mutable_grad() = at::full({12, 10}, 1e19f);  // the bound for 4 × 4 blocks: 1.15e18
  unchecked_vector.mutable_grad() = at::ones({6});
  optimizer.step();
  EXPECT_EQ(optimizer.diagnostics().overflow_skipped_steps, 0);
  auto bad = at::ones({12, 10});
  bad[1][2] = std::numeric_limits<float>::quiet_NaN();
  unchecked.mutable_grad() = bad;
  EXPECT_NO_THROW(optimizer.step());
  EXPECT_EQ(optimizer.diagnostics().steps_taken, 11);
  EXPECT_EQ(optimizer.diagnostics().skipped_steps, 0);
  EXPECT_TRUE(at::isnan(unchecked.detach()).any().item<bool>());
}

// Beside a group that checks, an unchecked group's NaN (in a matrix and a vector)
// neither raises nor skips the step, while the checking group's NaN still raises
// or skips, naming the checking group's parameter whatever the unchecked group
// holds; without a workspace limit (the gathered stacks and AdamW segments are
// checked) and within one (the parameters' gradients are).
void expect_unchecked_group_left_out(double workspace_limit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto policy : {NonFiniteGradients::Error, NonFiniteGradients::SkipStep}) {
    SCOPED_TRACE(to_string(policy) + ", workspace_limit " + std::to_string(workspace_limit));
    // Numbered group by group: 0 and 1 unchecked, 2 (6 × 6) and 3 (a vector) checked.
    std::vector<at::Tensor> params{at::ones({4, 4}).set_requires_grad(true), at::ones({5}).set_requires_grad(true),
        at::ones({6, 6}).set_requires_grad(true), at::ones({3}).set_requires_grad(true)};
    const auto options = DashOptions(0.1).workspace_limit(workspace_limit);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<at::Tensor>{params[0], params[1]},
        std::make_unique<DashOptions>(DashOptions(options).non_finite_gradients(NonFiniteGradients::Unchecked)));
    groups.emplace_back(std::vector<at::Tensor>{params[2], params[3]},
        std::make_unique<DashOptions>(DashOptions(options).non_finite_gradients(policy)));
    Dash optimizer(std::move(groups), options);
    auto gradients = [&](std::vector<float> fill) {
      for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = at::full(params[i].sizes(), fill[i]);
    };
    gradients({nan, nan, 1.0f, 1.0f});
    EXPECT_NO_THROW(optimizer.step());
    EXPECT_EQ(optimizer.diagnostics().skipped_steps, 0);
    for (size_t i : {2, 3}) {
      EXPECT_FALSE(at::equal(params[i].detach(), at::ones(params[i].sizes()))) << "parameter " << i;
      EXPECT_TRUE(at::isfinite(params[i].detach()).all().item<bool>()) << "parameter " << i;
    }
    for (const auto& [bad, named] :
        {std::pair{2, "parameter 2 of shape [6, 6]"}, std::pair{3, "parameter 3 of shape [3]"}}) {
      std::vector<float> fill{nan, nan, 1.0f, 1.0f};
      fill[bad] = nan;
      gradients(fill);
      if (policy == NonFiniteGradients::Error) {
        EXPECT_THAT(error_of([&] { optimizer.step(); }),
            HasSubstr("non-finite gradient (NaN or Inf) in " + std::string(named)));
        continue;
      }
      testing::CapturedWarnings captured;
      const auto skipped = optimizer.diagnostics().skipped_steps;
      optimizer.step();
      EXPECT_EQ(optimizer.diagnostics().skipped_steps, skipped + 1);
      EXPECT_THAT(captured.text(), HasSubstr("skipping a step: non-finite gradient in " + std::string(named)));
    }
  }
}

TEST(DashSafety, AnUncheckedGroupIsLeftOutOfTheCheck) {
  for (double limit : {0.0, 1.0}) expect_unchecked_group_left_out(limit);
}

// A step that reads no decision still announces factors reset at its root
// computations: there, at once.
TEST(DashSafety, UncheckedStepsAnnounceFactorResetsAtTheirRootSteps) {
  auto param = at::zeros({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, preconditioned_from_step_one(RootMethod::NewtonDB)
                              .beta_factor(1.0)
                              .non_finite_gradients(NonFiniteGradients::Unchecked));
  testing::CapturedWarnings captured;
  int first_reset = -1;
  for (int t = 0; t < 120; ++t) {
    param.mutable_grad() = at::full({4, 4}, 1e18f);
    optimizer.step();
    if (first_reset < 0 && optimizer.diagnostics().factor_stacks[0].factor_resets > 0) {
      first_reset = t;
      EXPECT_THAT(captured.text(), HasSubstr("were restarted from zero")) << "announced in the step that reset";
    }
  }
  EXPECT_GE(first_reset, 0);
  EXPECT_GE(optimizer.diagnostics().factor_stacks[0].factor_resets, 2);
  EXPECT_TRUE(at::isfinite(param).all().item<bool>());
}

// Distributed Shampoo's bounded-failure policy: off by default; at K, the step
// after the K-th failure in a row raises, naming the option, before it changes
// anything.
TEST(DashSafety, ConsecutiveRootFailuresRaiseWhenBounded) {
  auto options = preconditioned_from_step_one(RootMethod::EVD);
  options.root().epsilon(0.0);
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash unbounded({param}, options);
  for (int t = 0; t < 5; ++t) {
    param.mutable_grad() = at::zeros({4, 4});
    unbounded.step();
  }
  EXPECT_EQ(unbounded.diagnostics().factor_stacks[0].failures, 10);

  // (Unchecked gradients leave the limit's verdict in: the step still reads it.)
  for (auto policy : {NonFiniteGradients::Error, NonFiniteGradients::Unchecked}) {
    SCOPED_TRACE(to_string(policy));
    Dash bounded({param}, DashOptions(options).max_consecutive_root_failures(3).non_finite_gradients(policy));
    param.mutable_grad() = at::zeros({4, 4});
    for (int t = 0; t < 3; ++t) bounded.step();
    const auto steps = bounded.diagnostics().steps_taken;
    EXPECT_THAT(error_of([&] { bounded.step(); }),
        AllOf(HasSubstr("failed 3 root computations in a row"), HasSubstr("max_consecutive_root_failures = 3")));
    EXPECT_EQ(bounded.diagnostics().steps_taken, steps);
  }
}

TEST(DashSafety, NonFiniteGradientRaisesByDefaultAndCanSkip) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.1));
  auto bad = at::ones({4, 4});
  bad[1][2] = std::numeric_limits<float>::quiet_NaN();
  param.mutable_grad() = bad;
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("non-finite gradient"));
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4})));

  Dash skipping({param}, DashOptions(0.1).non_finite_gradients(NonFiniteGradients::SkipStep));
  skipping.step();
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4})));
  EXPECT_EQ(skipping.diagnostics().skipped_steps, 1);
}

// Groups of both policies: a step raises when any non-finite gradient is in a group
// that raises (naming that parameter), and skips when all are in skipping groups.
TEST(DashSafety, WithGroupsOfBothPoliciesARaisingGroupsNonFiniteGradientRaises) {
  std::vector<at::Tensor> params{at::ones({4, 4}).set_requires_grad(true), at::ones({6, 6}).set_requires_grad(true)};
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{params[0]},
      std::make_unique<DashOptions>(DashOptions(0.1).non_finite_gradients(NonFiniteGradients::SkipStep)));
  groups.emplace_back(std::vector<at::Tensor>{params[1]},
      std::make_unique<DashOptions>(DashOptions(0.1).non_finite_gradients(NonFiniteGradients::Error)));
  Dash optimizer(std::move(groups), DashOptions(0.1));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  params[0].mutable_grad() = at::full({4, 4}, nan);
  params[1].mutable_grad() = at::full({6, 6}, nan);
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("non-finite gradient (NaN or Inf) in parameter 1"));
  params[1].mutable_grad() = at::ones({6, 6});
  optimizer.step();
  EXPECT_EQ(optimizer.diagnostics().skipped_steps, 1);
  EXPECT_TRUE(at::equal(params[0].detach(), at::ones({4, 4})));
}

// A float64 gradient above FLT_MAX is finite: it is skipped as too large for the
// float32 statistics (not reported as NaN/Inf, which would end training by default).
TEST(DashSafety, FiniteFloat64GradientAboveFloat32RangeSkipsTheStep) {
  auto param = at::ones({4, 4}, at::kDouble).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.1));
  param.mutable_grad() = at::full({4, 4}, 1e40, at::kDouble);
  EXPECT_NO_THROW(optimizer.step());
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4}, at::kDouble)));
  EXPECT_EQ(optimizer.diagnostics().overflow_skipped_steps, 1);
  EXPECT_EQ(optimizer.diagnostics().skipped_steps, 0);
  param.mutable_grad() = at::ones({4, 4}, at::kDouble);
  optimizer.step();
  EXPECT_TRUE(at::isfinite(param).all().item<bool>());
  EXPECT_LT(param.max().item<double>(), 1.0);
}

// β within 2⁻²⁵ of 1 passes the [0, 1) check but is 1 in float32, where a bias
// correction 1 − β^t computed there was 0: Inf/NaN parameters, or none that moved.
// At step 1 the bias-corrected Adam direction is g/(|g| + ε), so the 1-D parameter
// moves by lr per entry and the matrix's grafted update has the norm lr·√numel.
TEST(DashSafety, BetasWithinFloat32RoundingOfOneGiveTheFirstAdamStep) {
  const double beta = 1.0 - 1e-8;
  ASSERT_EQ(static_cast<float>(beta), 1.0f);
  auto matrix = at::zeros({4, 5}).set_requires_grad(true);
  auto vector = at::zeros({3}).set_requires_grad(true);
  Dash optimizer({matrix, vector}, DashOptions(1e-3).beta_grad(beta).beta_graft(beta).adamw_betas({beta, beta}));
  matrix.mutable_grad() = at::linspace(-2.0, 2.0, 20).view({4, 5}) + 0.05;
  vector.mutable_grad() = at::tensor({1.0f, -3.0f, 0.5f});
  optimizer.step();
  EXPECT_TRUE(at::allclose(vector.detach(), at::tensor({-1e-3f, 1e-3f, -1e-3f}), 1e-4, 1e-9)) << vector;
  EXPECT_TRUE(at::isfinite(matrix).all().item<bool>());
  EXPECT_NEAR(matrix.detach().norm().item<double>(), 1e-3 * std::sqrt(20.0), 1e-6);
}

// A parameter's shape is part of its blocks' plan: a new one (p.data = ... in
// Python) is an error naming it, also with the same element count.
TEST(DashSafety, AParameterWhoseShapeChangedIsRejected) {
  auto param = at::ones({4, 5}).set_requires_grad(true);
  Dash optimizer({param});
  param.mutable_grad() = at::ones({4, 5});
  optimizer.step();
  param.set_data(at::ones({5, 4}));
  param.mutable_grad() = at::ones({5, 4});
  EXPECT_THAT(
      error_of([&] { optimizer.step(); }), AllOf(HasSubstr("parameter 0 has shape [5, 4]"), HasSubstr("[4, 5]")));
}

// A step with no gradient anywhere changes nothing and is not the first step:
// parameter groups may still be added after it.
TEST(DashSafety, AStepWithoutGradientsIsNotCounted) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param});
  optimizer.step();
  EXPECT_EQ(optimizer.diagnostics().steps_taken, 0);
  auto other = at::ones({3, 3}).set_requires_grad(true);
  EXPECT_NO_THROW(optimizer.add_param_group(torch::optim::OptimizerParamGroup({other})));
  param.mutable_grad() = at::ones({4, 4});
  optimizer.step();
  EXPECT_EQ(optimizer.diagnostics().steps_taken, 1);
}

// add_param_group after the first step (progressive unfreezing): the existing
// groups' state is kept bit for bit, so their parameters follow a twin that never
// saw the new group; the new group's blocks start fresh, so its parameters follow
// a fresh optimizer over that group alone. No workspace limit: a limit is a
// fraction of the whole state, and chunking roots differently can change their
// last bits on a CPU.
TEST(DashAddParamGroup, AfterTheFirstStepKeepsTheStateAndStartsTheNewGroupFresh) {
  const auto options =
      DashOptions(0.01).block_size(4).start_step(2).root_frequency(2).weight_decay(0.1).workspace_limit(0.0);
  auto generator = at::detail::createCPUGenerator(7);
  auto make = [&](std::vector<int64_t> shape) { return at::randn(shape, generator); };
  const std::vector<at::Tensor> first_init = {make({6, 5}), make({5})};
  const std::vector<at::Tensor> added_init = {make({7, 4}), make({3})};
  auto copies = [](const std::vector<at::Tensor>& init) {
    std::vector<at::Tensor> params;
    for (const auto& t : init) params.push_back(t.clone().set_requires_grad(true));
    return params;
  };
  auto first = copies(first_init), first_twin = copies(first_init);
  auto added = copies(added_init), added_twin = copies(added_init);
  Dash optimizer(first, options);
  Dash first_only(first_twin, options);
  std::unique_ptr<Dash> added_only;
  for (int step = 0; step < 10; ++step) {
    if (step == 4) {
      const auto bytes = optimizer.state_bytes();
      optimizer.add_param_group(
          torch::optim::OptimizerParamGroup(added, std::make_unique<DashOptions>(DashOptions(options).lr(0.02))));
      EXPECT_GT(optimizer.state_bytes(), bytes);
      added_only = std::make_unique<Dash>(added_twin, DashOptions(options).lr(0.02));
    }
    for (size_t i = 0; i < first.size(); ++i) {
      first[i].mutable_grad() = make(first[i].sizes().vec());
      first_twin[i].mutable_grad() = first[i].grad().clone();
    }
    if (step >= 4) {
      for (size_t i = 0; i < added.size(); ++i) {
        added[i].mutable_grad() = make(added[i].sizes().vec());
        added_twin[i].mutable_grad() = added[i].grad().clone();
      }
      added_only->step();
    }
    optimizer.step();
    first_only.step();
  }
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(at::equal(first[i], first_twin[i])) << "first group, " << i;
  for (size_t i = 0; i < added.size(); ++i) {
    EXPECT_FALSE(at::equal(added[i], added_init[i])) << "added group, " << i << ": moved";
    EXPECT_TRUE(at::equal(added[i], added_twin[i])) << "added group, " << i;
  }
  EXPECT_EQ(optimizer.diagnostics().steps_taken, 10);
  // An existing group whose state-shaping options were edited since cannot keep its
  // state: the same error as at the next step, and nothing added.
  static_cast<DashOptions&>(optimizer.param_groups()[0].options()).block_size(8);
  EXPECT_THAT(error_of([&] {
    optimizer.add_param_group(torch::optim::OptimizerParamGroup({at::ones({3, 3})}));
  }),
      HasSubstr("decide the shape of its state"));
  EXPECT_EQ(optimizer.param_groups().size(), 2u);
}

// add_param_group checks the group as the constructor does, and a refused group
// is not kept (it would make every later step fail).
TEST(DashSafety, AddParamGroupRefusesWhatTheConstructorRefuses) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param});
  auto add = [&](torch::optim::OptimizerParamGroup group) {
    return error_of([&] { optimizer.add_param_group(group); });
  };
  EXPECT_THAT(add(torch::optim::OptimizerParamGroup({at::ones({3, 3}, at::kLong)})), HasSubstr("floating point"));
  EXPECT_THAT(
      add(torch::optim::OptimizerParamGroup({at::ones({3, 3}, at::kFloat).to(at::kMeta)})), HasSubstr("meta device"));
  EXPECT_THAT(add(torch::optim::OptimizerParamGroup(
                  {at::ones({3, 3})}, std::make_unique<DashOptions>(DashOptions().block_size(0)))),
      HasSubstr("block_size"));
  EXPECT_THAT(add(torch::optim::OptimizerParamGroup(
                  {at::ones({3, 3})}, std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions()))),
      HasSubstr("another optimizer's options"));
  EXPECT_EQ(optimizer.param_groups().size(), 1u);
  param.mutable_grad() = at::ones({4, 4});
  EXPECT_NO_THROW(optimizer.step());
}

// A gradient of another dtype (set through .data in Python, past torch's own
// check) is not silently cast: a complex one would lose its imaginary part.
TEST(DashSafety, AGradientOfAnotherDtypeIsRejected) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param});
  param.mutable_grad() = at::ones({4, 4}, at::kDouble);
  EXPECT_THAT(error_of([&] { optimizer.step(); }), AllOf(HasSubstr("gradient of parameter 0"), HasSubstr("Double")));
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4})));
}

TEST(DashSafety, SparseGradientIsRejected) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.1));
  param.mutable_grad() = at::ones({4, 4}).to_sparse();
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("sparse"));
}

// A parameter without a gradient is not touched, and its state does not advance:
// after it gets gradients again it behaves like a fresh run of the same length.
TEST(DashSafety, ParameterWithoutGradientIsSkipped) {
  auto generator = at::detail::createCPUGenerator(5);
  auto a = at::randn({6, 6}, generator).set_requires_grad(true);
  auto b = at::randn({6, 6}, generator).set_requires_grad(true);
  auto c = at::randn({3}, generator).set_requires_grad(true);
  auto b_alone = b.detach().clone().set_requires_grad(true);
  auto options = DashOptions(0.05).block_size(4).start_step(2).root_frequency(2).weight_decay(0.1);
  Dash optimizer({a, b, c}, options);
  Dash reference({b_alone}, options);
  const auto b_before = b.detach().clone();
  for (int t = 0; t < 3; ++t) {  // b and c have no gradient
    a.mutable_grad() = at::randn({6, 6}, generator);
    optimizer.step();
  }
  EXPECT_TRUE(at::equal(b.detach(), b_before));
  for (int t = 0; t < 5; ++t) {
    auto g = at::randn({6, 6}, generator);
    a.mutable_grad() = at::randn({6, 6}, generator);
    b.mutable_grad() = g;
    b_alone.mutable_grad() = g.clone();
    optimizer.step();
    reference.step();
  }
  EXPECT_LE((b.detach() - b_alone.detach()).abs().max().item<double>(), 1e-5);
}

// The same for 1-D parameters, which share their group's AdamW segment: parameters
// without a gradient between steps with one (two neighbours in the first group's
// segment, one in the second's, whose segment starts further on) keep their state
// bitwise, while their neighbours in the segment step on; with gradients again
// they go on as runs that never had the steps without.
TEST(DashSafety, OneDimensionalParametersWithoutGradientKeepTheirMoments) {
  auto generator = at::detail::createCPUGenerator(6);
  const std::vector<std::vector<int64_t>> shapes{{5}, {7}, {4}, {3}, {6}, {2}};
  const std::vector<bool> idle_between{false, true, true, false, false, true};
  const std::vector<size_t> group_of{0, 0, 0, 0, 1, 1};
  const auto options = DashOptions(0.05).weight_decay(0.1);
  const auto second_options = DashOptions(options).lr(0.02);
  std::vector<at::Tensor> params;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{}, std::make_unique<DashOptions>(options));
  groups.emplace_back(std::vector<at::Tensor>{}, std::make_unique<DashOptions>(second_options));
  std::vector<at::Tensor> alone;
  std::vector<std::unique_ptr<Dash>> references;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(at::randn(shapes[i], generator).set_requires_grad(true));
    groups[group_of[i]].params().push_back(params[i]);
    if (!idle_between[i]) continue;
    alone.push_back(params[i].detach().clone().set_requires_grad(true));
    references.push_back(
        std::make_unique<Dash>(std::vector<at::Tensor>{alone.back()}, group_of[i] == 0 ? options : second_options));
  }
  Dash optimizer(std::move(groups), options);
  auto step = [&](bool idle_have_gradients) {
    size_t r = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      auto g = at::randn(shapes[i], generator);
      const bool has = idle_have_gradients || !idle_between[i];
      params[i].mutable_grad() = has ? g : at::Tensor();
      if (!idle_between[i]) continue;
      alone[r].mutable_grad() = g.clone();
      if (has) references[r]->step();
      ++r;
    }
    optimizer.step();
  };
  for (int t = 0; t < 2; ++t) step(true);
  std::vector<at::Tensor> values_before;
  std::vector<ParameterState> states_before;
  for (size_t i = 0; i < params.size(); ++i) {
    values_before.push_back(params[i].detach().clone());
    states_before.push_back(optimizer.parameter_state(i));
    for (auto& [name, tensor] : states_before.back()) tensor = tensor.clone();
  }
  for (int t = 0; t < 3; ++t) step(false);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!idle_between[i]) {
      EXPECT_FALSE(at::equal(params[i].detach(), values_before[i])) << "parameter " << i << " stepped on";
      continue;
    }
    EXPECT_TRUE(at::equal(params[i].detach(), values_before[i])) << "parameter " << i;
    const auto state = optimizer.parameter_state(i);
    ASSERT_EQ(state.size(), states_before[i].size());
    for (size_t e = 0; e < state.size(); ++e) {
      EXPECT_TRUE(at::equal(state[e].second, states_before[i][e].second))
          << "parameter " << i << "'s " << state[e].first;
    }
  }
  for (int t = 0; t < 3; ++t) step(true);
  size_t r = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!idle_between[i]) continue;
    EXPECT_LE((params[i].detach() - alone[r].detach()).abs().max().item<double>(), 1e-6) << "parameter " << i;
    ++r;
  }
}

TEST(DashSafety, BadOptionsAreRejectedAtConstruction) {
  auto param = at::ones({2, 2}).set_requires_grad(true);
  auto with = [&](DashOptions options) { return error_of([&] { Dash optimizer({param}, options); }); };
  EXPECT_THAT(with(DashOptions(-1.0)), HasSubstr("lr"));
  EXPECT_THAT(with(DashOptions().beta_grad(1.0)), HasSubstr("beta_grad"));
  EXPECT_THAT(with(DashOptions().beta_graft(-0.1)), HasSubstr("beta_graft"));
  EXPECT_THAT(with(DashOptions().beta_factor(1.5)), HasSubstr("beta_factor"));
  EXPECT_THAT(with(DashOptions().adamw_betas({0.9, 1.0})), HasSubstr("adamw_betas"));
  EXPECT_THAT(with(DashOptions().block_size(0)), HasSubstr("block_size"));
  EXPECT_THAT(with(DashOptions().root_frequency(0)), HasSubstr("root_frequency"));
  EXPECT_THAT(with(DashOptions().start_step(0)), HasSubstr("start_step"));
  EXPECT_THAT(
      with(DashOptions().root(InverseRootOptions().newton(NewtonOptions().steps(0)))), HasSubstr("newton_steps"));
  EXPECT_THAT(with(DashOptions().root(InverseRootOptions().epsilon(-1.0))), HasSubstr("epsilon"));
  EXPECT_THAT(with(DashOptions().eps_graft(-1.0)), HasSubstr("eps_graft"));
  // ε = 0 would turn a zero gradient into 0/0 = NaN parameters.
  EXPECT_THAT(with(DashOptions().eps_graft(0.0)), HasSubstr("eps_graft"));
  EXPECT_THAT(with(DashOptions().adamw_eps(0.0)), HasSubstr("adamw_eps"));
  // Below FLT_MIN, ε is 0 (or subnormal) in the float32 statistics: 0/0 again.
  EXPECT_THAT(with(DashOptions().eps_graft(1e-50)), HasSubstr("eps_graft"));
  EXPECT_THAT(with(DashOptions().adamw_eps(1e-39)), HasSubstr("adamw_eps"));
  EXPECT_NO_THROW(Dash({param}, DashOptions().eps_graft(1e-37).adamw_eps(1e-37)));
  EXPECT_THAT(with(DashOptions().weight_decay(std::nan(""))), HasSubstr("weight_decay"));
  EXPECT_THAT(with(DashOptions().momentum(1.0)), HasSubstr("momentum"));
  EXPECT_THAT(with(DashOptions().weight_decay(-1.0)), HasSubstr("weight_decay"));
  EXPECT_THAT(with(DashOptions().max_consecutive_root_failures(-1)), HasSubstr("max_consecutive_root_failures"));
  EXPECT_NO_THROW(Dash({param}, DashOptions().beta_factor(1.0)));  // AdaGrad-style sums
}

// Options edited after construction get the same checks: setters at once, edits
// of a group's options at the next step; and options that shaped the state
// (here block_size) cannot change under it.
TEST(DashSafety, OptionsEditedLaterAreCheckedToo) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.1).block_size(2));
  param.mutable_grad() = at::zeros({4, 4});
  optimizer.step();
  auto& options = static_cast<DashOptions&>(optimizer.param_groups()[0].options());
  EXPECT_THAT(error_of([&] { options.set_lr(std::nan("")); }), HasSubstr("lr"));
  options.beta_grad(1.5);
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("beta_grad"));
  options.beta_grad(0.9);
  options.block_size(4);
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("block_size"));
  options.block_size(2);
  optimizer.step();  // usable again
  EXPECT_TRUE(at::isfinite(param).all().item<bool>());
}

// Before the first step there is no state to keep: edits of the options that shape
// it are applied by rebuilding it (a scheduler may set momentum at construction).
TEST(DashSafety, OptionsThatShapeTheStateMayChangeBeforeTheFirstStep) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.1).block_size(4));
  auto& options = static_cast<DashOptions&>(optimizer.param_groups()[0].options());
  options.block_size(2).momentum(0.5);
  param.mutable_grad() = at::ones({4, 4});
  optimizer.step();
  const auto diagnostics = optimizer.diagnostics();
  ASSERT_EQ(diagnostics.block_stacks.size(), 1u);
  EXPECT_EQ(diagnostics.block_stacks[0].rows, 2);
  EXPECT_EQ(diagnostics.block_stacks[0].count, 4);
  EXPECT_EQ(diagnostics.steps_taken, 1);
  options.block_size(4);
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("block_size"));
}

// The same tensor twice would be updated twice; a gradient of another shape
// (even with the same element count) is not this parameter's.
TEST(DashSafety, DuplicateParametersAndMisshapenGradientsAreRejected) {
  auto param = at::ones({4, 4}).set_requires_grad(true);
  EXPECT_THAT(error_of([&] { Dash optimizer({param, param}); }), HasSubstr("appears twice"));
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{param});
  groups.emplace_back(std::vector<at::Tensor>{param});
  EXPECT_THAT(error_of([&] { Dash optimizer(groups, DashOptions()); }), HasSubstr("appears twice"));
  Dash optimizer({param});
  param.mutable_grad() = at::ones({2, 8});
  EXPECT_THAT(error_of([&] { optimizer.step(); }), HasSubstr("has shape"));
  EXPECT_TRUE(at::equal(param.detach(), at::ones({4, 4})));
}

// Parameters in overlapping memory would be written back from several threads at
// once; views of one storage that do not overlap (a flat buffer's pieces) are fine.
TEST(DashSafety, ParametersInOverlappingMemoryAreRejected) {
  auto base = at::zeros({10, 20});
  auto left = base.narrow(1, 0, 10).set_requires_grad(true);
  auto middle = base.narrow(1, 5, 10).set_requires_grad(true);
  EXPECT_THAT(error_of([&] { Dash optimizer({left, middle}); }), HasSubstr("overlapping memory"));
  auto flat = at::zeros({300});
  auto first = flat.narrow(0, 0, 100).view({10, 10}).set_requires_grad(true);
  auto second = flat.narrow(0, 100, 200).view({10, 20}).set_requires_grad(true);
  Dash optimizer({first, second}, DashOptions(0.1).block_size(4));
  first.mutable_grad() = at::ones({10, 10});
  second.mutable_grad() = at::ones({10, 20});
  optimizer.step();
  EXPECT_TRUE(at::all(flat < 0).item<bool>()) << "both pieces took their step";
}

// Parameters are updated in place whatever their strides: a permuted 4-D weight
// (its matrix view needs a copy) and a transposed matrix (a strided view) move
// exactly as contiguous twins with the same gradients do.
TEST(DashSafety, NonContiguousParametersAreUpdatedInPlace) {
  auto generator = at::detail::createCPUGenerator(13);
  auto conv = at::randn({2, 2, 2, 3}, generator).permute({3, 0, 1, 2});  // (3, 2, 2, 2), strided
  auto transposed = at::randn({6, 5}, generator).t();                    // (5, 6), strided
  auto bias = at::randn({8}, generator).slice(0, 0, 8, 2);               // (4), stride 2
  std::vector<at::Tensor> strided = {conv, transposed, bias};
  std::vector<at::Tensor> twins;
  for (const auto& p : strided) twins.push_back(p.contiguous());
  ASSERT_FALSE(conv.is_contiguous());
  const auto conv_data = conv.data_ptr();
  // With weight decay on every parameter: the copy of a parameter that is no view
  // of its matrix is decayed and updated, then written back.
  auto options =
      preconditioned_from_step_one(RootMethod::EVD).block_size(3).weight_decay(0.1).decay_one_dimensional(true);
  Dash a(strided, options);
  Dash b(twins, options);
  for (int t = 0; t < 3; ++t) testing::step_twins(strided, a, twins, b, generator);
  EXPECT_EQ(conv.data_ptr(), conv_data) << "updated in place";
  for (size_t i = 0; i < strided.size(); ++i) EXPECT_TRUE(at::equal(strided[i], twins[i])) << "parameter " << i;
}

TEST(DashSafety, ParamGroupOptionsAreCheckedToo) {
  auto param = at::ones({2, 2}).set_requires_grad(true);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{param}, std::make_unique<DashOptions>(DashOptions().block_size(-3)));
  EXPECT_THAT(error_of([&] { Dash optimizer(groups, DashOptions()); }), HasSubstr("block_size"));
}

}  // namespace
}  // namespace dash

namespace dash {
namespace {

// Several threads stepping one optimizer take turns (<dash/optimizer.h>): every
// step counted, none lost, the state never seen half-updated. Without the lock
// such a run corrupted the heap (about 2 in 40 runs of the Python package) or lost
// steps; here each step also recomputes the roots and swaps the options in, so
// that unserialised steps would collide in the engine's shared buffers.
TEST(DashThreads, StepsFromSeveralThreadsAreSerialised) {
  auto weight = at::randn({24, 24}).set_requires_grad(true);
  auto bias = at::randn({24}).set_requires_grad(true);
  weight.mutable_grad() = at::randn({24, 24});
  bias.mutable_grad() = at::randn({24});
  const auto options = DashOptions(1e-3).block_size(8).start_step(1).root_frequency(1).execution(Execution::Batched);
  Dash optimizer({weight, bias}, options);
  constexpr int kThreads = 4;
  constexpr int kSteps = 200;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int step = 0; step < kSteps; ++step) {
          if (step % 2 == 0) {
            optimizer.step_with_options({DashOptions(options).lr(1e-3 * (1 + t))});
          } else {
            optimizer.step();
          }
        }
      } catch (const std::exception& error) {
        errors[t] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(optimizer.diagnostics().steps_taken, kThreads * kSteps);
  EXPECT_TRUE(weight.isfinite().all().item<bool>());
  EXPECT_TRUE(bias.isfinite().all().item<bool>());
}

// Options that enter float32 arithmetic are refused beyond float32's range, by
// name: eps_graft = 1e39 was Inf there (the parameters never moved), weight_decay =
// 1e39 made them Inf at the first step.
TEST(DashOptionsRange, ValuesBeyondFloat32AreRefusedByName) {
  auto param = at::randn({8, 8}).set_requires_grad(true);
  const std::vector<std::pair<DashOptions, std::string>> cases = {{DashOptions(1e39), "lr must be in [0, "},
      {DashOptions().eps_graft(1e39), "eps_graft must be in ["},
      {DashOptions().adamw_eps(1e39), "adamw_eps must be in ["},
      {DashOptions().weight_decay(1e39), "weight_decay must be in [0, "},
      {DashOptions(1e30).weight_decay(1e30), "lr · weight_decay = "}};
  for (const auto& [options, message] : cases) {
    EXPECT_THAT(error_of([&] { Dash optimizer({param}, options); }), HasSubstr(message));
  }
  Dash optimizer({param}, DashOptions());
  EXPECT_THAT(error_of([&] { optimizer.param_groups()[0].options().set_lr(1e39); }), HasSubstr("lr must be in [0, "));
}

// step_with_options checks every group's options before it changes any, and a
// step that raises keeps the options the groups had.
TEST(DashThreads, StepWithOptionsKeepsTheOptionsOfARefusedStep) {
  auto param = at::randn({8, 8}).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(0.01).block_size(8));
  EXPECT_THAT(error_of([&] { optimizer.step_with_options({DashOptions(-1.0)}); }), HasSubstr("lr must be"));
  EXPECT_THAT(error_of([&] { optimizer.step_with_options({}); }), HasSubstr("0 option sets for 1 param groups"));
  param.mutable_grad() = at::full({8, 8}, std::nan(""));
  EXPECT_THAT(error_of([&] { optimizer.step_with_options({DashOptions(0.5).block_size(8)}); }),
      HasSubstr("non-finite gradient"));
  EXPECT_DOUBLE_EQ(static_cast<const DashOptions&>(optimizer.param_groups()[0].options()).lr(), 0.01);
  param.mutable_grad() = at::ones({8, 8});
  optimizer.step_with_options({DashOptions(0.5).block_size(8)});
  EXPECT_DOUBLE_EQ(static_cast<const DashOptions&>(optimizer.param_groups()[0].options()).lr(), 0.5);
}

}  // namespace
}  // namespace dash
