// A two-step example worked from the formulas of spec §4 in float64: a 3×2
// parameter with B = 2 is cut into a 2×2 block and a ragged 1×2 block.

#include <dash/optimizer.h>

#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace dash {
namespace {

// (A + εI)^{-1/4} by float64 eigh with the Shampoo eigenvalue repair.
at::Tensor inverse_fourth_root(const at::Tensor& a, double epsilon) {
  auto [values, vectors] = at::linalg_eigh(a);
  auto repaired = values - values.min().clamp_max(0.0) + epsilon;
  return at::matmul(vectors * repaired.pow(-0.25).unsqueeze(0), vectors.t());
}

struct BlockReference {
  at::Tensor left, right, graft, ema;
};

TEST(DashHandWorked, TwoStepsOnARaggedThreeByTwoParameter) {
  const double lr = 0.1, beta_grad = 0.9, beta_factor = 0.95, beta_graft = 0.95, eps_graft = 1e-8, epsilon = 1e-3;
  auto w0 = at::tensor({0.5, -1.0, 2.0, 0.25, -0.75, 1.5}, at::kDouble).view({3, 2});
  const at::Tensor gradients[] = {
      at::tensor({1.0, 2.0, -0.5, 0.3, 0.7, -1.2}, at::kDouble).view({3, 2}),
      at::tensor({-0.4, 0.9, 1.1, -0.2, 0.05, 0.6}, at::kDouble).view({3, 2}),
  };

  // Reference: blocks rows [0, 2) and [2, 3), all columns.
  auto w = w0.clone();
  BlockReference blocks[2];
  const int64_t starts[] = {0, 2}, lengths[] = {2, 1};
  for (int b = 0; b < 2; ++b) {
    blocks[b] = {at::zeros({lengths[b], lengths[b]}, at::kDouble), at::zeros({2, 2}, at::kDouble),
        at::zeros({lengths[b], 2}, at::kDouble), at::zeros({lengths[b], 2}, at::kDouble)};
  }
  for (int t = 1; t <= 2; ++t) {
    for (int b = 0; b < 2; ++b) {
      auto g = gradients[t - 1].narrow(0, starts[b], lengths[b]);
      auto& s = blocks[b];
      s.left = beta_factor * s.left + (1 - beta_factor) * at::matmul(g, g.t());
      s.right = beta_factor * s.right + (1 - beta_factor) * at::matmul(g.t(), g);
      s.graft = beta_graft * s.graft + (1 - beta_graft) * g * g;
      s.ema = beta_grad * s.ema + (1 - beta_grad) * g;
      auto ghat = s.ema / (1 - std::pow(beta_grad, t));
      auto adam = ghat / ((s.graft / (1 - std::pow(beta_graft, t))).sqrt() + eps_graft);
      auto u =
          at::matmul(at::matmul(inverse_fourth_root(s.left, epsilon), ghat), inverse_fourth_root(s.right, epsilon));
      auto p = u * (adam.norm() / (u.norm() + 1e-16));
      w.narrow(0, starts[b], lengths[b]).sub_(lr * p);
    }
  }

  auto param = w0.to(at::kFloat).set_requires_grad(true);
  Dash optimizer({param}, DashOptions(lr)
                              .block_size(2)
                              .start_step(1)
                              .root_frequency(1)
                              .beta_grad(beta_grad)
                              .beta_factor(beta_factor)
                              .beta_graft(beta_graft)
                              .eps_graft(eps_graft)
                              .root(dash::testing::solver_options(RootMethod::EVD).epsilon(epsilon)));
  for (const auto& g : gradients) {
    param.mutable_grad() = g.to(at::kFloat);
    optimizer.step();
  }
  // float32 arithmetic on O(1) values through two eighs: 1e-5 relative.
  auto error = ((param.detach().to(at::kDouble) - w).abs().max() / w.abs().max()).item<double>();
  EXPECT_LE(error, 1e-5) << param << "\n" << w;
  EXPECT_GT((w - w0).abs().max().item<double>(), 1e-2);  // the example really moves
}

}  // namespace
}  // namespace dash
