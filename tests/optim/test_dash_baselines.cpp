// With preconditioning never started, DASH's step is its grafting direction; where
// the math coincides it must equal LibTorch's own optimizers. And maximize is the
// step on the negated gradient, as torch.optim defines it.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim.h>

#include <functional>
#include <vector>

namespace dash {
namespace {

// Two parameters (2-D and 1-D) and a fixed sequence of gradients, fed to any
// optimizer; returns the parameters after `steps` steps.
std::vector<at::Tensor> run(
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>& make, int steps = 15) {
  auto generator = at::detail::createCPUGenerator(7);
  std::vector<at::Tensor> params = {
      at::randn({6, 4}, generator).set_requires_grad(true), at::randn({5}, generator).set_requires_grad(true)};
  auto optimizer = make(params);
  for (int t = 0; t < steps; ++t) {
    for (auto& p : params) {
      // A gradient that depends on the parameter (so a wrong update changes later
      // gradients) plus a fixed random part.
      p.mutable_grad() = p.detach() * 0.3 + at::randn(p.sizes(), generator);
    }
    optimizer->step();
  }
  return {params[0].detach().clone(), params[1].detach().clone()};
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tolerance) {
  for (size_t i = 0; i < a.size(); ++i) {
    auto difference = ((a[i] - b[i]).abs().max() / b[i].abs().max()).item<double>();
    EXPECT_LE(difference, tolerance) << "parameter " << i;
  }
}

DashOptions never_preconditioned(double lr) { return DashOptions(lr).start_step(1000000).decay_one_dimensional(true); }

// Adam grafting with β_G = β₁, β_g = β₂, ε_g = ε and 1-D AdamW with the same betas
// is AdamW; the float32 arithmetic is ordered differently (√(v/c₂) vs √v/√c₂), so
// 1e-6 relative.
TEST(DashBaselines, AdamGraftingEqualsAdamW) {
  auto dash = run([](auto params) {
    return std::make_unique<Dash>(params, never_preconditioned(0.01)
                                              .beta_grad(0.9)
                                              .beta_graft(0.99)
                                              .eps_graft(1e-8)
                                              .adamw_betas({0.9, 0.99})
                                              .adamw_eps(1e-8)
                                              .weight_decay(0.1));
  });
  auto adamw = run([](auto params) {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(0.01).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1));
  });
  expect_close(dash, adamw, 1e-6);
}

// SGD grafting with β_G = 0 (Ĝ = G) and heavy-ball or Nesterov momentum is SGD
// with momentum and dampening 0. 1-D parameters go through AdamW, so only the
// 2-D parameter is compared.
TEST(DashBaselines, SgdGraftingEqualsSgdWithMomentum) {
  for (bool nesterov : {false, true}) {
    auto dash = run([&](auto params) {
      return std::make_unique<Dash>(params,
          never_preconditioned(0.05).grafting(GraftingType::SGD).beta_grad(0.0).momentum(0.9).nesterov(nesterov));
    });
    auto sgd = run([&](auto params) {
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(nesterov));
    });
    expect_close({dash[0]}, {sgd[0]}, 1e-6);
  }
}

TEST(DashBaselines, AdaGradGraftingEqualsAdagrad) {
  auto dash = run([](auto params) {
    return std::make_unique<Dash>(
        params, never_preconditioned(0.1).grafting(GraftingType::AdaGrad).beta_grad(0.0).eps_graft(1e-10));
  });
  auto adagrad = run([](auto params) {
    return std::make_unique<torch::optim::Adagrad>(params, torch::optim::AdagradOptions(0.1).eps(1e-10));
  });
  expect_close({dash[0]}, {adagrad[0]}, 1e-6);
}

TEST(DashBaselines, RmspropGraftingEqualsRmsprop) {
  auto dash = run([](auto params) {
    return std::make_unique<Dash>(params,
        never_preconditioned(0.01).grafting(GraftingType::RMSprop).beta_grad(0.0).beta_graft(0.99).eps_graft(1e-8));
  });
  auto rmsprop = run([](auto params) {
    return std::make_unique<torch::optim::RMSprop>(params, torch::optim::RMSpropOptions(0.01).alpha(0.99).eps(1e-8));
  });
  expect_close({dash[0]}, {rmsprop[0]}, 1e-6);
}

// maximize (torch.optim's meaning): a step on G maximising is the step on −G
// minimising, bit for bit (negation is exact), preconditioned and not, whole stacks
// and chunks, the 1-D AdamW parameter included.
TEST(DashMaximize, IsTheStepOnTheNegatedGradient) {
  for (double limit : {0.0, 1.0}) {
    auto options =
        DashOptions(0.01).block_size(4).start_step(2).root_frequency(2).weight_decay(0.1).workspace_limit(limit);
    std::vector<at::Tensor> maximizing = {at::randn({6, 5}), at::randn({5})};
    std::vector<at::Tensor> minimizing = {maximizing[0].clone(), maximizing[1].clone()};
    for (auto& p : maximizing) p.set_requires_grad(true);
    for (auto& p : minimizing) p.set_requires_grad(true);
    Dash up(maximizing, DashOptions(options).maximize(true));
    Dash down(minimizing, options);
    for (int step = 0; step < 6; ++step) {
      for (size_t i = 0; i < maximizing.size(); ++i) {
        auto grad = at::randn(maximizing[i].sizes());
        maximizing[i].mutable_grad() = grad;
        minimizing[i].mutable_grad() = -grad;
      }
      up.step();
      down.step();
    }
    for (size_t i = 0; i < maximizing.size(); ++i) {
      EXPECT_TRUE(at::equal(maximizing[i], minimizing[i])) << "limit " << limit << ", parameter " << i;
    }
  }
}

}  // namespace
}  // namespace dash
