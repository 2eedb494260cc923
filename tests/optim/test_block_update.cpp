// The per-block arithmetic of a step (src/optim/block_update.h) against the spec's
// formulas (../shared/dash-algorithm.md §4, steps 2–8) written out independently in
// float64 on a few random blocks.

#include "optim/block_update.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <gtest/gtest.h>

#include <cmath>

namespace dash::optim {
namespace {

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

class BlockUpdate : public ::testing::Test {
 protected:
  at::Generator generator_ = at::detail::createCPUGenerator(17);
  at::Tensor random(std::vector<int64_t> shape) { return at::randn(shape, generator_); }
};

// Step 2: L ← β L + (1 − β) G Gᵀ, R ← β R + (1 − β) Gᵀ G; β = 1 adds.
TEST_F(BlockUpdate, FactorsFollowTheirExponentialAverage) {
  auto grad = random({3, 5, 4});
  auto g = grad.to(at::kDouble);
  for (double beta : {0.95, 1.0}) {
    auto left = random({3, 5, 5});
    auto right = random({3, 4, 4});
    const auto expected_left = (beta == 1.0 ? 1.0 : beta) * left.to(at::kDouble) +
                               (beta == 1.0 ? 1.0 : 1.0 - beta) * at::matmul(g, g.transpose(1, 2));
    const auto expected_right = (beta == 1.0 ? 1.0 : beta) * right.to(at::kDouble) +
                                (beta == 1.0 ? 1.0 : 1.0 - beta) * at::matmul(g.transpose(1, 2), g);
    accumulate_factor(left, grad, /*left=*/true, beta);
    accumulate_factor(right, grad, /*left=*/false, beta);
    EXPECT_LE(max_difference(left, expected_left), 1e-5) << "beta " << beta;
    EXPECT_LE(max_difference(right, expected_right), 1e-5) << "beta " << beta;
  }
}

// Steps 3, 5, 6 for Adam, RMSprop, AdaGrad and SGD grafting, at step t = 3.
TEST_F(BlockUpdate, GraftingDirectionsAreTheSpecsFormulas) {
  const double beta_grad = 0.9, beta_graft = 0.95, eps = 1e-3;
  for (auto grafting : {GraftingType::Adam, GraftingType::RMSprop, GraftingType::AdaGrad, GraftingType::SGD}) {
    auto grad = random({2, 3, 4});
    MomentState state{random({2, 3, 4}), random({2, 3, 4}).abs(), at::Tensor(), at::full({2, 1, 1}, 3.0)};
    const auto m = state.grad_ema.to(at::kDouble).clone();
    const auto a = state.graft_stat.to(at::kDouble).clone();
    const auto g = grad.to(at::kDouble);
    if (grafting == GraftingType::SGD) state.graft_stat = at::Tensor();
    StepHyper hyper{beta_grad, beta_graft, eps, grafting, /*bias_correction=*/true, 0.0, false};
    auto work = Workspace::like(grad);
    grafting_direction(grad, state, hyper, work);

    const auto m_new = beta_grad * m + (1.0 - beta_grad) * g;
    const auto ghat = m_new / (1.0 - std::pow(beta_grad, 3));
    EXPECT_LE(max_difference(state.grad_ema, m_new), 1e-6);
    EXPECT_LE(max_difference(work.ghat, ghat), 1e-5);
    at::Tensor a_new, expected;
    switch (grafting) {
      case GraftingType::Adam:
        a_new = beta_graft * a + (1.0 - beta_graft) * g * g;
        expected = ghat / ((a_new / (1.0 - std::pow(beta_graft, 3))).sqrt() + eps);
        break;
      case GraftingType::RMSprop:
        a_new = beta_graft * a + (1.0 - beta_graft) * g * g;
        expected = ghat / (a_new.sqrt() + eps);
        break;
      case GraftingType::AdaGrad:
        a_new = a + g * g;
        expected = ghat / (a_new.sqrt() + eps);
        break;
      default:
        expected = ghat;
    }
    if (a_new.defined()) EXPECT_LE(max_difference(state.graft_stat, a_new), 1e-5) << static_cast<int>(grafting);
    EXPECT_LE(max_difference(work.graft, expected), 1e-4) << static_cast<int>(grafting);
  }
}

// Step 7: U = L̄ Ĝ R̄, rescaled per block to ‖P_g‖_F; one-sided: U = L̄ Ĝ; no
// grafting: U itself.
TEST_F(BlockUpdate, PreconditionedDirectionTakesTheGraftingNormPerBlock) {
  auto left = random({2, 3, 3});
  auto right = random({2, 4, 4});
  auto work = Workspace::like(at::empty({2, 3, 4}));
  work.ghat.copy_(random({2, 3, 4}));
  work.graft.copy_(random({2, 3, 4}));
  const auto ghat = work.ghat.to(at::kDouble).clone();
  const auto graft_norms = at::linalg_vector_norm(work.graft.to(at::kDouble), 2, {1, 2}, true);
  const auto u = at::matmul(at::matmul(left.to(at::kDouble), ghat), right.to(at::kDouble));
  const auto expected = u * graft_norms / (at::linalg_vector_norm(u, 2, {1, 2}, true) + 1e-16);
  EXPECT_LE(max_difference(preconditioned_direction(work, left, right, GraftingType::Adam), expected), 1e-5);

  work.ghat.copy_(ghat);
  EXPECT_LE(max_difference(preconditioned_direction(work, left, right, GraftingType::None), u), 1e-5);

  work.ghat.copy_(ghat);
  const auto one_sided = at::matmul(left.to(at::kDouble), ghat);
  const auto expected_one_sided =
      one_sided * graft_norms / (at::linalg_vector_norm(one_sided, 2, {1, 2}, true) + 1e-16);
  EXPECT_LE(
      max_difference(preconditioned_direction(work, left, at::Tensor(), GraftingType::Adam), expected_one_sided), 1e-5);
}

// Step 8: B ← μ B + P; heavy ball returns B, Nesterov P + μ B.
TEST_F(BlockUpdate, MomentumIsHeavyBallOrNesterov) {
  for (bool nesterov : {false, true}) {
    auto direction = random({2, 3, 3});
    MomentState state{at::Tensor(), at::Tensor(), random({2, 3, 3}), at::ones({2, 1, 1})};
    const auto buffer = 0.8 * state.momentum.to(at::kDouble) + direction.to(at::kDouble);
    const auto expected = nesterov ? direction.to(at::kDouble) + 0.8 * buffer : buffer;
    StepHyper hyper;
    hyper.momentum = 0.8;
    hyper.nesterov = nesterov;
    const auto result = apply_momentum(direction.clone(), state, hyper);
    EXPECT_LE(max_difference(state.momentum, buffer), 1e-6) << nesterov;
    EXPECT_LE(max_difference(result, expected), 1e-6) << nesterov;
  }
}

}  // namespace
}  // namespace dash::optim
