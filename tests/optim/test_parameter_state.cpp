// Dash::parameter_state: a parameter's part of the state as views, under torch-like
// names. After one step the factors are (1 − β) G Gᵀ and Gᵀ G of that parameter's
// own blocks (computed here from the gradient), the views follow the live state, and
// an AdamW parameter's moments come in its own shape.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace dash {
namespace {

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
  // 70 = 32 + 32 + 6 rows, 40 = 32 + 8 columns: four shapes of blocks.
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{32, 32}, {32, 8}, {6, 32}, {6, 8}}) {
    const auto prefix = "blocks_" + std::to_string(rows) + "x" + std::to_string(cols) + ".";
    SCOPED_TRACE(prefix);
    const auto blocks = blocks_of_shape(grad, rows, cols);
    ASSERT_TRUE(state.count(prefix + "factor_left"));
    const auto& left = state.at(prefix + "factor_left");
    const auto& right = state.at(prefix + "factor_right");
    ASSERT_EQ(left.size(0), static_cast<int64_t>(blocks.size()));
    EXPECT_EQ(state.at(prefix + "root_left").sizes(), left.sizes());
    EXPECT_EQ(state.at(prefix + "grad_ema").sizes(), (std::vector<int64_t>{left.size(0), rows, cols}));
    for (size_t b = 0; b < blocks.size(); ++b) {
      const auto g = blocks[b].to(at::kDouble);
      const auto expected_left = (1.0 - kBeta) * g.mm(g.t());
      const auto expected_right = (1.0 - kBeta) * g.t().mm(g);
      EXPECT_TRUE(at::allclose(left[b].to(at::kDouble), expected_left, 1e-5, 1e-5)) << "block " << b;
      EXPECT_TRUE(at::allclose(right[b].to(at::kDouble), expected_right, 1e-5, 1e-5)) << "block " << b;
    }
  }
  // Four shapes × (two factors, two roots, grad_ema, graft_stat, step); momentum is off by default.
  EXPECT_EQ(state.size(), 4u * 7u);
  EXPECT_FALSE(state.count("blocks_32x32.momentum"));

  // An AdamW parameter: its moments in its own shape.
  const auto vector_state = state_of(optimizer, 1);
  ASSERT_TRUE(vector_state.count("grad_ema"));
  EXPECT_EQ(vector_state.at("grad_ema").sizes(), at::IntArrayRef({16}));
  EXPECT_FALSE(vector_state.count("factor_left"));

  // Views of the live state: the next step shows through them.
  const auto before = state.at("blocks_32x32.factor_left").clone();
  params[0].mutable_grad() = at::randn({70, 40});
  optimizer.step();
  EXPECT_FALSE(at::equal(state.at("blocks_32x32.factor_left"), before));
  EXPECT_TRUE(at::equal(state.at("blocks_32x32.factor_left"), state_of(optimizer, 0).at("blocks_32x32.factor_left")));

  EXPECT_THROW(optimizer.parameter_state(3), c10::Error);
}

}  // namespace
}  // namespace dash
