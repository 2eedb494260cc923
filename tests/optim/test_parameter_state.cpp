// Dash::parameter_state: a parameter's part of the state as views, block by block.
// After one step the factors are (1 − β) G Gᵀ and Gᵀ G of that parameter's own
// blocks (computed here from the gradient), the views follow the live state, and an
// AdamW parameter's moments come in its own shape. Dash::load_parameter_states: the
// states continue bitwise, and a state that does not fit is refused by entry.

#include <dash/optimizer.h>

#include "support/error_message.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace dash {
namespace {

using ::testing::HasSubstr;

std::map<std::string, at::Tensor> state_of(const Dash& optimizer, size_t index) {
  std::map<std::string, at::Tensor> state;
  for (const auto& [name, tensor] : optimizer.parameter_state(index)) state[name] = tensor;
  return state;
}

// The blocks of `grad` of shape rows × cols, in the block grid's row-major order,
// with B = 32: full blocks and the edges.
std::vector<at::Tensor> blocks_of_shape(const at::Tensor& grad, int64_t rows, int64_t cols) {
  std::vector<at::Tensor> blocks;
  for (int64_t r = 0; r < grad.size(0); r += 32) {
    for (int64_t c = 0; c < grad.size(1); c += 32) {
      const auto block = grad.narrow(0, r, std::min<int64_t>(32, grad.size(0) - r))
                             .narrow(1, c, std::min<int64_t>(32, grad.size(1) - c));
      if (block.size(0) == rows && block.size(1) == cols) blocks.push_back(block);
    }
  }
  return blocks;
}

TEST(ParameterState, FactorsAreThoseOfTheParametersOwnBlocks) {
  constexpr double kBeta = 0.9;
  std::vector<at::Tensor> params{at::zeros({70, 40}).set_requires_grad(true), at::zeros({16}).set_requires_grad(true),
      at::zeros({32, 32}).set_requires_grad(true)};
  Dash optimizer(params, DashOptions(0.01).block_size(32).beta_factor(kBeta).start_step(5));
  const auto grad = at::randn({70, 40}, at::kDouble).to(at::kFloat);
  params[0].mutable_grad() = grad;
  params[1].mutable_grad() = at::randn({16});
  params[2].mutable_grad() = at::randn({32, 32});
  optimizer.step();

  const auto state = state_of(optimizer, 0);
  // 70 = 32 + 32 + 6 rows, 40 = 32 + 8 columns: six blocks of four shapes. Each
  // gradient block's factors are one numbered block's, and each number is one block's.
  std::set<int64_t> matched;
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{32, 32}, {32, 8}, {6, 32}, {6, 8}}) {
    for (const auto& block : blocks_of_shape(grad, rows, cols)) {
      const auto g = block.to(at::kDouble);
      const auto expected_left = (1.0 - kBeta) * g.mm(g.t());
      const auto expected_right = (1.0 - kBeta) * g.t().mm(g);
      int64_t found = -1;
      for (int64_t j = 0; j < 6; ++j) {
        const auto prefix = "block." + std::to_string(j) + ".";
        ASSERT_TRUE(state.count(prefix + "factor_left")) << prefix;
        const auto& left = state.at(prefix + "factor_left");
        if (left.size(0) != rows || !at::allclose(left.to(at::kDouble), expected_left, 1e-5, 1e-5)) continue;
        EXPECT_TRUE(at::allclose(state.at(prefix + "factor_right").to(at::kDouble), expected_right, 1e-5, 1e-5));
        EXPECT_EQ(state.at(prefix + "root_left").sizes(), left.sizes());
        EXPECT_EQ(state.at(prefix + "grad_ema").sizes(), (std::vector<int64_t>{rows, cols}));
        found = j;
      }
      ASSERT_GE(found, 0) << "a " << rows << "×" << cols << " block";
      EXPECT_TRUE(matched.insert(found).second) << "block " << found << " twice";
    }
  }
  EXPECT_EQ(matched.size(), 6u);
  // Six blocks × (two factors, two roots, two failure counts, two root choices,
  // grad_ema, graft_stat, step); momentum is off by default, and so is the warm
  // eigenbasis.
  EXPECT_EQ(state.size(), 6u * 11u);
  EXPECT_FALSE(state.count("block.0.eigenvectors_left"));
  EXPECT_FALSE(state.count("block.0.momentum"));
  EXPECT_FALSE(state.count("block.6.factor_left"));

  // An AdamW parameter: its moments in its own shape.
  const auto vector_state = state_of(optimizer, 1);
  ASSERT_TRUE(vector_state.count("grad_ema"));
  EXPECT_EQ(vector_state.at("grad_ema").sizes(), at::IntArrayRef({16}));
  EXPECT_FALSE(vector_state.count("block.0.factor_left"));

  // Views of the live state: the next step shows through them.
  const auto before = state.at("block.0.factor_left").clone();
  params[0].mutable_grad() = at::randn({70, 40});
  optimizer.step();
  EXPECT_FALSE(at::equal(state.at("block.0.factor_left"), before));
  EXPECT_TRUE(at::equal(state.at("block.0.factor_left"), state_of(optimizer, 0).at("block.0.factor_left")));

  EXPECT_THROW(optimizer.parameter_state(3), c10::Error);
}

// Three parameters (blocks of two shapes, an AdamW vector), momentum and a warm
// eigenbasis on, so that every kind of entry is in the state.
struct Problem {
  std::vector<at::Tensor> params{at::zeros({20, 12}).set_requires_grad(true), at::zeros({9}).set_requires_grad(true),
      at::zeros({8, 8}).set_requires_grad(true)};
  DashOptions options = problem_options();

  static DashOptions problem_options() {
    auto options = DashOptions(0.05).block_size(8).momentum(0.5).start_step(1).root_frequency(2);
    options.root().method(RootMethod::EVD);
    options.root().eigen().refresh_tolerance(0.1);
    return options;
  }
  void step(Dash& optimizer, int64_t seed) {
    const auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
    for (auto& param : params) param.mutable_grad() = at::randn(param.sizes(), generator);
    optimizer.step();
  }
};

std::vector<ParameterState> copied_states(const Dash& optimizer, size_t count) {
  std::vector<ParameterState> states(count);
  for (size_t i = 0; i < count; ++i) {
    for (const auto& [name, tensor] : optimizer.parameter_state(i)) states[i].emplace_back(name, tensor.clone());
  }
  return states;
}

// Each block's t counts the steps its parameter had a gradient in: parameters of one
// stack (one 16 × 16 block each) skip steps in patterns that leave a few runs of
// blocks with gradients (t advanced per run) or many (one mask).
TEST(ParameterState, BlockStepCountsAreThoseOfTheirParametersGradients) {
  constexpr int64_t kParams = 12;
  std::vector<at::Tensor> params;
  for (int64_t i = 0; i < kParams; ++i) params.push_back(at::zeros({16, 16}).set_requires_grad(true));
  Dash optimizer(params, DashOptions(0.01).block_size(16).start_step(100));
  std::vector<int64_t> expected(kParams, 0);
  for (int64_t step = 1; step <= 9; ++step) {
    for (int64_t i = 0; i < kParams; ++i) {
      // Every third step all of them; then parameters 3–5 without a gradient (two
      // runs); then every odd one (six runs of one block).
      const bool has = step % 3 == 0 || (step % 3 == 1 ? (i < 3 || i > 5) : i % 2 == 0);
      params[i].mutable_grad() = has ? at::randn({16, 16}) : at::Tensor();
      if (has) ++expected[i];
    }
    optimizer.step();
  }
  for (int64_t i = 0; i < kParams; ++i) {
    EXPECT_EQ(state_of(optimizer, static_cast<size_t>(i)).at("block.0.step").item<double>(), expected[i])
        << "parameter " << i;
  }
}

TEST(ParameterState, LoadedStatesContinueBitwise) {
  Problem original, resumed;
  Dash optimizer(original.params, original.options);
  for (int64_t step = 0; step < 5; ++step) original.step(optimizer, step);
  const auto states = copied_states(optimizer, original.params.size());
  ASSERT_TRUE(std::any_of(states[0].begin(), states[0].end(),
      [](const auto& entry) { return entry.first.find("eigenvectors_left") != std::string::npos; }));
  for (size_t i = 0; i < original.params.size(); ++i) resumed.params[i].detach().copy_(original.params[i].detach());
  Dash loaded(resumed.params, DashOptions(0.5).block_size(32));  // the loaded options win
  const auto diagnostics = optimizer.diagnostics();
  loaded.load_parameter_states({original.options}, states,
      {diagnostics.steps_taken, diagnostics.skipped_steps, diagnostics.overflow_skipped_steps});
  EXPECT_EQ(loaded.diagnostics().steps_taken, 5);
  for (int64_t step = 5; step < 9; ++step) {
    original.step(optimizer, step);
    resumed.step(loaded, step);
  }
  for (size_t i = 0; i < original.params.size(); ++i) {
    EXPECT_TRUE(at::equal(original.params[i], resumed.params[i])) << "parameter " << i;
  }
}

// torch.distributed.checkpoint loads only the names a fresh optimizer's state dict
// holds: a fresh one shows every name a stepped one does (what the first root
// computation allocates, as zeros), and a state saved fresh resumes bitwise.
TEST(ParameterState, AFreshOptimizerShowsEveryNameASteppedOneShows) {
  Problem stepped, fresh, resumed;
  Dash optimizer(stepped.params, stepped.options);
  Dash untouched(fresh.params, fresh.options);
  auto names = [](const Dash& dash, size_t index) {
    std::set<std::string> result;
    for (const auto& entry : dash.parameter_state(index)) result.insert(entry.first);
    return result;
  };
  const auto before = names(untouched, 0);
  EXPECT_TRUE(before.count("block.0.eigenvectors_left") && before.count("block.0.consecutive_failures_right"));
  for (int64_t step = 0; step < 3; ++step) stepped.step(optimizer, step);
  for (size_t i = 0; i < stepped.params.size(); ++i) EXPECT_EQ(names(optimizer, i), names(untouched, i)) << i;

  // The fresh state (zero failures, no valid eigenbasis) loaded into another optimizer
  // steps as the fresh one does.
  Dash loaded(resumed.params, resumed.options);
  loaded.load_parameter_states({fresh.options}, copied_states(untouched, fresh.params.size()), {0, 0, 0});
  for (int64_t step = 0; step < 5; ++step) {
    fresh.step(untouched, step);
    resumed.step(loaded, step);
  }
  for (size_t i = 0; i < fresh.params.size(); ++i) EXPECT_TRUE(at::equal(fresh.params[i], resumed.params[i])) << i;
}

TEST(ParameterState, AStateThatDoesNotFitIsRefusedNamingTheEntry) {
  Problem problem;
  Dash optimizer(problem.params, problem.options);
  problem.step(optimizer, 0);
  const auto states = copied_states(optimizer, problem.params.size());
  Problem target;
  Dash fresh(target.params, target.options);
  auto refused = [&](std::vector<ParameterState> edited) {
    return testing::error_of([&] { fresh.load_parameter_states({problem.options}, edited, {1, 0, 0}); });
  };
  auto without = states;
  without[0].erase(std::find_if(
      without[0].begin(), without[0].end(), [](const auto& entry) { return entry.first == "block.1.root_right"; }));
  EXPECT_THAT(refused(without), HasSubstr("parameter 0's state has no 'block.1.root_right'"));
  auto unknown = states;
  unknown[0].emplace_back("block.0.factor_middle", at::zeros({8, 8}));
  EXPECT_THAT(refused(unknown), HasSubstr("parameter 0's state has an entry 'block.0.factor_middle'"));
  auto beyond = states;
  beyond[2].emplace_back("block.1.factor_left", at::zeros({8, 8}));  // the 8 × 8 parameter is one block
  EXPECT_THAT(refused(beyond), HasSubstr("parameter 2's state has an entry 'block.1.factor_left'"));
  auto leading_zero = states;
  leading_zero[0].emplace_back("block.01.factor_left", at::zeros({8, 8}));
  EXPECT_THAT(refused(leading_zero), HasSubstr("parameter 0's state has an entry 'block.01.factor_left'"));
  auto half_basis = states;
  half_basis[2].erase(std::find_if(half_basis[2].begin(), half_basis[2].end(),
      [](const auto& entry) { return entry.first == "block.0.eigenbasis_valid_left"; }));
  EXPECT_THAT(refused(half_basis), HasSubstr("without the other"));
  auto adamw = states;
  adamw[1].emplace_back("block.0.factor_left", at::zeros({8, 8}));
  EXPECT_THAT(refused(adamw), HasSubstr("parameter 1's state has an entry 'block.0.factor_left'"));
  auto reshaped = states;
  for (auto& [name, tensor] : reshaped[2]) {
    if (name == "block.0.grad_ema") tensor = at::zeros({4, 16});
  }
  EXPECT_THAT(refused(reshaped), HasSubstr("parameter 2's state entry 'block.0.grad_ema' is [4, 16]"));
  EXPECT_THAT(testing::error_of([&] {
    fresh.load_parameter_states({problem.options}, {states[0]}, {1, 0, 0});
  }),
      HasSubstr("the state is for 1 parameters, this optimizer has 3"));
  // Nothing was loaded: the optimizer is still fresh.
  EXPECT_EQ(fresh.diagnostics().steps_taken, 0);
  EXPECT_TRUE(
      at::equal(fresh.parameter_state(0).front().second, at::zeros_like(fresh.parameter_state(0).front().second)));
}

// add_param_group before the first step plans the state for every group at once: the
// added group's state is there to show.
TEST(ParameterState, AGroupAddedBeforeTheFirstStepHasItsStateAtOnce) {
  Problem problem;
  Dash optimizer(std::vector<at::Tensor>{problem.params[0]}, problem.options);
  optimizer.add_param_group(torch::optim::OptimizerParamGroup({problem.params[2]}));
  std::set<std::string> names;
  for (const auto& entry : optimizer.parameter_state(1)) names.insert(entry.first);
  EXPECT_TRUE(names.count("block.0.factor_left"));
}

}  // namespace
}  // namespace dash
