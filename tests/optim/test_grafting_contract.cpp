// The contract every grafting type keeps (spec §4 step 6; Distributed Shampoo's
// AbstractPreconditionerListTest is the model): one parameterised suite over
// dash::kGraftingTypes, so that a new type is checked by adding it there and its
// formula to support/grafting_reference.h.

#include "optim/block_update.h"
#include "optim/grafting.h"
#include "optim/moments.h"
#include "support/grafting_reference.h"
#include "support/spd_matrices.h"
#include "support/temporary_folder.h"

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <string>
#include <vector>

namespace dash::optim {
namespace {

using testing::max_difference;

class GraftingContract : public ::testing::TestWithParam<GraftingType> {
 protected:
  at::Generator generator_ = at::detail::createCPUGenerator(23);
  at::Tensor random(std::vector<int64_t> shape) { return at::randn(shape, generator_); }
  const Grafting& type() const { return grafting_for(GetParam()); }
  StepHyper hyper(bool bias_correction = true) const {
    return StepHyper{0.9, 0.95, 1e-3, GetParam(), bias_correction, 0.0, false};
  }
  // Moments of two (3, 4) blocks at steps 3 and 7, a statistic where the type keeps one.
  MomentState moments() {
    MomentState state{random({2, 3, 4}), type().keeps_statistic() ? random({2, 3, 4}).abs() : at::Tensor(),
        at::Tensor(), at::empty({2, 1, 1})};
    state.steps[0].fill_(3.0);
    state.steps[1].fill_(7.0);
    return state;
  }
  DashOptions options() const {
    // The hyper-parameters of hyper().
    return DashOptions(0.1)
        .grafting(GetParam())
        .beta_grad(0.9)
        .beta_graft(0.95)
        .eps_graft(1e-3)
        .block_size(4)
        .start_step(2)
        .root_frequency(2)
        .execution(Execution::Batched);
  }
};

// M, A, Ĝ and P_g after a step are the spec's, through the fused pass (a contiguous
// stack) and the unfused ATen one (a strided gradient), with and without bias
// correction.
TEST_P(GraftingContract, DirectionIsTheSpecsFormula) {
  for (bool contiguous : {true, false}) {
    for (bool bias_correction : {true, false}) {
      auto grad = contiguous ? random({2, 3, 4}) : random({2, 4, 3}).transpose(1, 2);
      auto state = moments();
      const auto m = state.grad_ema.to(at::kDouble).clone();
      const auto a = state.graft_stat.defined() ? state.graft_stat.to(at::kDouble).clone() : at::Tensor();
      auto work = Workspace::like(at::empty({2, 3, 4}));
      grafting_direction(grad, state, hyper(bias_correction), work);
      const auto expected = testing::expected_grafting(grad.to(at::kDouble), m, a, state.steps, hyper(bias_correction));
      const auto where = ::testing::Message() << "contiguous " << contiguous << ", bias correction " << bias_correction;
      EXPECT_LE(max_difference(state.grad_ema, expected.m), 1e-6) << where;
      EXPECT_LE(max_difference(work.ghat, expected.ghat), 1e-5) << where;
      if (expected.a.defined()) EXPECT_LE(max_difference(state.graft_stat, expected.a), 1e-5) << where;
      EXPECT_LE(max_difference(work.graft, expected.graft), 1e-4) << where;
    }
  }
}

// A block's state holds the statistic A exactly when the type keeps one (it is part
// of the state's shape: checkpoints and state dicts carry it).
TEST_P(GraftingContract, StateHoldsAStatisticExactlyWhenTheTypeKeepsOne) {
  const auto zero = zero_moments({2, 3, 4}, true, hyper(), at::TensorOptions().dtype(at::kFloat));
  EXPECT_EQ(zero.graft_stat.defined(), type().keeps_statistic());
  auto param = at::randn({8, 8}).set_requires_grad(true);
  Dash optimizer(std::vector<at::Tensor>{param}, options());
  bool has_statistic = false;
  for (const auto& [name, tensor] : optimizer.parameter_state(0)) has_statistic |= name == "block.0.graft_stat";
  EXPECT_EQ(has_statistic, type().keeps_statistic());
}

// A type's fused pass, where it takes the tensors, ends where its unfused direction
// does (to float32 rounding); where it does not, it changes nothing.
TEST_P(GraftingContract, FusedStepEqualsTheUnfusedPathOrChangesNothing) {
  const auto grad = random({2, 3, 4});
  auto fused_state = moments();
  MomentState unfused_state{fused_state.grad_ema.clone(),
      fused_state.graft_stat.defined() ? fused_state.graft_stat.clone() : at::Tensor(), at::Tensor(),
      fused_state.steps.clone()};
  auto fused = Workspace::like(grad);
  if (!type().fused_step(grad, fused_state, hyper(), fused.ghat, fused.graft)) {
    EXPECT_TRUE(at::equal(fused_state.grad_ema, unfused_state.grad_ema)) << "a refused fused step changed M";
    if (fused_state.graft_stat.defined()) {
      EXPECT_TRUE(at::equal(fused_state.graft_stat, unfused_state.graft_stat)) << "a refused fused step changed A";
    }
    return;
  }
  auto unfused = Workspace::like(grad);
  grafting_direction(grad.transpose(1, 2).contiguous().transpose(1, 2), unfused_state, hyper(), unfused);
  EXPECT_LE(max_difference(fused.ghat, unfused.ghat), 1e-6);
  EXPECT_LE(max_difference(fused.graft, unfused.graft), 1e-5);
  EXPECT_LE(max_difference(fused_state.graft_stat, unfused_state.graft_stat), 1e-6);
}

// Before t_start the optimizer steps along the grafting direction: W ← W − lr · P_g.
TEST_P(GraftingContract, BeforeTheStartStepTheUpdateIsTheGraftingDirection) {
  auto param = at::randn({8, 8}, generator_).set_requires_grad(true);
  const auto before = param.detach().to(at::kDouble).clone();
  Dash optimizer(std::vector<at::Tensor>{param}, options().start_step(100));
  const auto grad = random({8, 8});
  param.mutable_grad() = grad.clone();
  optimizer.step();
  StepHyper first = hyper();
  const auto g = grad.to(at::kDouble).view({1, 8, 8});
  const auto zeros = at::zeros_like(g);
  const auto expected = testing::expected_grafting(g, zeros, zeros, at::ones({1, 1, 1}), first);
  EXPECT_LE(max_difference(param.detach(), before - 0.1 * expected.graft.view({8, 8})), 1e-6);
}

// Once preconditioned, a type that rescales gives each block of the update its
// grafting direction's Frobenius norm (spec §4 step 7); one that does not leaves it.
TEST_P(GraftingContract, PreconditionedBlocksTakeTheGraftingNormWhereTheTypeRescales) {
  auto param = at::randn({8, 8}, generator_).set_requires_grad(true);
  const auto before = param.detach().clone();
  Dash optimizer(std::vector<at::Tensor>{param}, options().start_step(1).root_frequency(1));
  const auto grad = random({8, 8});
  param.mutable_grad() = grad.clone();
  optimizer.step();
  auto block_norms = [](const at::Tensor& matrix) {  // the four 4 × 4 blocks
    return matrix.to(at::kDouble).reshape({2, 4, 2, 4}).permute({0, 2, 1, 3}).reshape({4, 16}).norm(2, {1});
  };
  const auto update_norms = block_norms((before - param.detach()) / 0.1);
  const auto g = grad.to(at::kDouble).view({1, 8, 8});
  const auto zeros = at::zeros_like(g);
  const auto expected = testing::expected_grafting(g, zeros, zeros, at::ones({1, 1, 1}), hyper());
  const auto graft_norms = block_norms(expected.graft.view({8, 8}));
  const double relative = ((update_norms - graft_norms).abs() / graft_norms).max().item<double>();
  if (type().rescales_update()) {
    EXPECT_LE(relative, 1e-5);
  } else {
    EXPECT_GT(relative, 1e-3) << "the preconditioned update was rescaled";
  }
}

// Training with the type resumes from a checkpoint bit for bit, its statistic
// included.
TEST_P(GraftingContract, ACheckpointResumesBitForBit) {
  std::vector<at::Tensor> params = {
      at::randn({8, 8}, generator_).set_requires_grad(true), at::randn({5}, generator_).set_requires_grad(true)};
  std::vector<at::Tensor> grads;
  for (int step = 0; step < 8; ++step) {
    for (const auto& param : params) grads.push_back(at::randn(param.sizes(), generator_));
  }
  auto run = [&](Dash& optimizer, std::vector<at::Tensor>& weights, int first, int count) {
    for (int step = first; step < first + count; ++step) {
      for (size_t i = 0; i < weights.size(); ++i) weights[i].mutable_grad() = grads[2 * step + i].clone();
      optimizer.step();
    }
  };
  Dash optimizer(params, options());
  run(optimizer, params, 0, 4);
  testing::TemporaryFolder folder;
  torch::save(optimizer, folder.file("optimizer.pt"));
  std::vector<at::Tensor> resumed;
  for (const auto& param : params) resumed.push_back(param.detach().clone().set_requires_grad(true));
  run(optimizer, params, 4, 4);
  Dash fresh(resumed, options());
  torch::load(fresh, folder.file("optimizer.pt"));
  run(fresh, resumed, 4, 4);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::isfinite(params[i]).all().item<bool>()) << "parameter " << i;
    EXPECT_TRUE(at::equal(params[i], resumed[i])) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, GraftingContract, ::testing::ValuesIn(kGraftingTypes),
    [](const ::testing::TestParamInfo<GraftingType>& info) { return to_string(info.param); });

}  // namespace
}  // namespace dash::optim
