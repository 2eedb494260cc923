// DASH against AdamW on an ill-conditioned least-squares problem. The
// conditioning is rotated (random singular vectors), which a diagonal method such
// as Adam cannot undo and Shampoo's L^{-1/4} G R^{-1/4} largely does. Both get
// the same linear lr decay and pick their best lr from the same grid.

#include <dash/optimizer.h>

#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/optim.h>

#include <functional>
#include <iostream>
#include <limits>

namespace dash {
namespace {

struct LeastSquares {
  at::Tensor x, y;
  LeastSquares() {
    auto generator = at::detail::createCPUGenerator(2025);
    const int64_t n = 256, d = 32, k = 16;
    auto [u, r1] = at::linalg_qr(at::randn({n, d}, generator));
    auto [v, r2] = at::linalg_qr(at::randn({d, d}, generator));
    // Singular values 1 … 1/40: κ(XᵀX) = 1600.
    auto singular = at::pow(10.0, at::linspace(0.0, -std::log10(40.0), d));
    x = at::matmul(u * singular.unsqueeze(0), v.t()) * std::sqrt(static_cast<double>(n));
    y = at::matmul(x, at::randn({d, k}, generator));
  }
  at::Tensor loss(const at::Tensor& w) const { return (at::matmul(x, w) - y).pow(2).mean() * 0.5; }
};

double final_loss(const LeastSquares& problem,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>& make, int steps,
    const std::function<void(torch::optim::Optimizer&)>& inspect = nullptr) {
  auto w = at::zeros({32, 16}).set_requires_grad(true);
  auto optimizer = make({w});
  const double peak = optimizer->param_groups()[0].options().get_lr();
  for (int t = 0; t < steps; ++t) {
    // Linear decay to 0, the same for both optimizers: without it an
    // Adam-normalised step keeps hopping at the lr scale near the optimum.
    optimizer->param_groups()[0].options().set_lr(peak * (1.0 - static_cast<double>(t) / steps));
    optimizer->zero_grad();
    problem.loss(w).backward();
    optimizer->step();
  }
  if (inspect) inspect(*optimizer);
  auto loss = problem.loss(w.detach()).item<double>();
  return std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity();
}

TEST(DashConvergence, TenTimesLowerLossThanAdamWOnIllConditionedLeastSquares) {
  const LeastSquares problem;
  const int steps = 200;
  const double grid[] = {1.0, 0.3, 0.1, 0.03, 0.01, 0.003};
  double best_dash = std::numeric_limits<double>::infinity();
  double best_adamw = std::numeric_limits<double>::infinity();
  for (double lr : grid) {
    double dash = final_loss(
        problem,
        [&](auto params) { return std::make_unique<Dash>(params, DashOptions(lr).start_step(1).root_frequency(5)); },
        steps);
    double adamw = final_loss(
        problem,
        [&](auto params) {
          return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr).weight_decay(0.0));
        },
        steps);
    std::cout << "lr " << lr << ": dash " << dash << ", adamw " << adamw << "\n";
    best_dash = std::min(best_dash, dash);
    best_adamw = std::min(best_adamw, adamw);
  }
  std::cout << "best after " << steps << " steps: dash " << best_dash << ", adamw " << best_adamw << "\n";
  EXPECT_LE(best_dash * 10.0, best_adamw);
}

// Warm-started eigenbases (InverseRootOptions::eigen_refresh_tolerance) reuse
// most eigenvectors on this problem and train about as well as eigh every time.
TEST(DashConvergence, WarmStartedEvdTrainsLikeEvd) {
  const LeastSquares problem;
  const int steps = 200;
  auto evd = [](double tolerance) {
    return DashOptions(0.1).start_step(1).root_frequency(5).root(
        dash::testing::solver_options(RootMethod::EVD).eigen(EigenOptions().refresh_tolerance(tolerance)));
  };
  DashDiagnostics diagnostics;
  const double plain = final_loss(
      problem, [&](auto params) { return std::make_unique<Dash>(params, evd(0.0)); }, steps);
  const double warm = final_loss(
      problem, [&](auto params) { return std::make_unique<Dash>(params, evd(0.05)); }, steps,
      [&](torch::optim::Optimizer& optimizer) { diagnostics = static_cast<Dash&>(optimizer).diagnostics(); });
  int64_t kept = 0, warm_started = 0, recomputed = 0;
  for (const auto& stack : diagnostics.factor_stacks) {
    kept += stack.roots_kept;
    warm_started += stack.roots_warm_started;
    recomputed += stack.roots_recomputed;
  }
  std::cout << "EVD " << plain << ", warm-started EVD " << warm << " (roots: " << kept << " kept, " << warm_started
            << " warm-started, " << recomputed << " by eigh)\n";
  EXPECT_LE(warm, plain * 1.5);
  EXPECT_GT(kept + warm_started, recomputed);
}

}  // namespace
}  // namespace dash
