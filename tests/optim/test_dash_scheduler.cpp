// LibTorch's LR schedulers drive dash::Dash through get_lr/set_lr.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/schedulers/step_lr.h>

namespace dash {
namespace {

// Group 0 takes the defaults (lr 0.1), group 1 sets lr 0.2.
std::vector<torch::optim::OptimizerParamGroup> two_groups(const at::Tensor& a, const at::Tensor& b) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{a});
  groups.emplace_back(std::vector<at::Tensor>{b}, std::make_unique<DashOptions>(DashOptions(0.2)));
  return groups;
}

// The lr a scheduler sets is the lr the next step uses, in every group: with a
// constant gradient and Adam grafting (before t_start the step is P_g, whose
// entries are 1 for a constant gradient) each step moves every element by exactly
// the group's current lr. LibTorch's StepLR multiplies on its scheduler steps 2,
// 4, … (counting from 0), so the five optimizer steps use lr 0.1, 0.1, 0.1, 0.05,
// 0.05 in group 0 (twice that in group 1), and 0.025 is set after the last.
TEST(DashScheduler, StepLRSetsTheStepOfEveryGroup) {
  auto a = at::zeros({4, 4}).set_requires_grad(true);
  auto b = at::zeros({3}).set_requires_grad(true);
  Dash optimizer(two_groups(a, b), DashOptions(0.1).eps_graft(1e-12).adamw_eps(1e-12).start_step(100));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);
  const double expected_lr[] = {0.1, 0.1, 0.1, 0.05, 0.05};
  for (int epoch = 0; epoch < 5; ++epoch) {
    const auto a_before = a.detach().clone();
    const auto b_before = b.detach().clone();
    a.mutable_grad() = at::ones({4, 4});
    b.mutable_grad() = at::ones({3});
    optimizer.step();
    scheduler.step();
    EXPECT_TRUE(at::allclose(a_before - a.detach(), at::full({4, 4}, expected_lr[epoch]), 1e-5, 0.0)) << epoch;
    EXPECT_TRUE(at::allclose(b_before - b.detach(), at::full({3}, 2.0 * expected_lr[epoch]), 1e-5, 0.0)) << epoch;
  }
  EXPECT_DOUBLE_EQ(optimizer.param_groups()[0].options().get_lr(), 0.025);
  EXPECT_DOUBLE_EQ(optimizer.param_groups()[1].options().get_lr(), 0.05);
}

// Each group's own lr sets its step: with Adam grafting the first step moves
// every element by lr (|Ĝ/√Â| = 1 at t = 1).
TEST(DashScheduler, GroupLearningRatesApplyToTheirParameters) {
  auto a = at::zeros({4, 4}).set_requires_grad(true);
  auto b = at::zeros({3}).set_requires_grad(true);
  Dash optimizer(two_groups(a, b), DashOptions(0.1).eps_graft(1e-12).adamw_eps(1e-12));
  a.mutable_grad() = at::ones({4, 4});
  b.mutable_grad() = at::ones({3});
  optimizer.step();
  EXPECT_TRUE(at::allclose(a.detach(), at::full({4, 4}, -0.1f)));
  EXPECT_TRUE(at::allclose(b.detach(), at::full({3}, -0.2f)));
}

}  // namespace
}  // namespace dash
