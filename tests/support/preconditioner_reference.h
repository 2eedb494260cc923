#pragma once

// Each preconditioner family's arithmetic for one block in float64, as its paper
// writes it, and the engine's step around it (spec §4: Ĝ, Adam grafting, t_start,
// the root schedule, the rescale to the grafting norm, lr): the independent
// reference the family contract suite (tests/optim/test_preconditioner_contract.cpp)
// holds dash::Dash to. A new family adds its ReferenceBlock here.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace dash::testing {

/// A family's state of one (rows, cols) block.
class ReferenceBlock {
 public:
  virtual ~ReferenceBlock() = default;
  /// Its statistics from the step's gradient block `g`.
  virtual void update(const at::Tensor& g) = 0;
  /// Its amortised products (at the steps the schedule says).
  virtual void refresh() = 0;
  /// The direction U from Ĝ.
  virtual at::Tensor direction(const at::Tensor& ghat) const = 0;
};

/// Root-inverse Shampoo: L ← β L + (1 − β) G Gᵀ, R ← β R + (1 − β) Gᵀ G; L̄ = (L + εI)^(-1/4)
/// by eigh with the Shampoo eigenvalue repair (identity before the first refresh);
/// U = L̄ Ĝ R̄.
class ShampooReference final : public ReferenceBlock {
 public:
  ShampooReference(const DashOptions& options, int64_t rows, int64_t cols)
      : beta_(options.beta_factor()),
        epsilon_(options.root().epsilon()),
        left_(at::zeros({rows, rows}, at::kDouble)),
        right_(at::zeros({cols, cols}, at::kDouble)),
        left_root_(at::eye(rows, at::kDouble)),
        right_root_(at::eye(cols, at::kDouble)) {}

  void update(const at::Tensor& g) override {
    left_ = beta_ * left_ + (1.0 - beta_) * at::matmul(g, g.t());
    right_ = beta_ * right_ + (1.0 - beta_) * at::matmul(g.t(), g);
  }
  void refresh() override {
    left_root_ = inverse_fourth_root(left_);
    right_root_ = inverse_fourth_root(right_);
  }
  at::Tensor direction(const at::Tensor& ghat) const override {
    return at::matmul(at::matmul(left_root_, ghat), right_root_);
  }

 private:
  at::Tensor inverse_fourth_root(const at::Tensor& a) const {
    auto [values, vectors] = at::linalg_eigh(a);
    auto repaired = values - values.min().clamp_max(0.0) + epsilon_;
    return at::matmul(vectors * repaired.pow(-0.25).unsqueeze(0), vectors.t());
  }

  double beta_, epsilon_;
  at::Tensor left_, right_, left_root_, right_root_;
};

/// Spectral descent (Muon's update): no statistics; U = NS₅(Ĝ) · max(1, rows/cols)^½,
/// the quintic Newton–Schulz iteration X ← aX + (bA + cA²)X, A = X Xᵀ, from
/// X₀ = Ĝ/(‖Ĝ‖_F + 1e-7), (a, b, c) = (3.4445, −4.7750, 2.0315), on the wide side.
class SpectralDescentReference final : public ReferenceBlock {
 public:
  SpectralDescentReference(const DashOptions& options, int64_t rows, int64_t cols)
      : steps_(options.newton_schulz_steps()), scale_(std::sqrt(std::max(1.0, static_cast<double>(rows) / cols))) {}

  void update(const at::Tensor&) override {}
  void refresh() override {}
  at::Tensor direction(const at::Tensor& ghat) const override {
    const bool tall = ghat.size(0) > ghat.size(1);
    auto x = tall ? ghat.t() : ghat;
    x = x / (x.norm() + 1e-7);
    for (int64_t step = 0; step < steps_; ++step) {
      const auto a = at::matmul(x, x.t());
      x = 3.4445 * x + at::matmul(-4.7750 * a + 2.0315 * at::matmul(a, a), x);
    }
    return (tall ? x.t() : x) * scale_;
  }

 private:
  int64_t steps_;
  double scale_;
};

inline std::unique_ptr<ReferenceBlock> reference_block(
    PreconditionerType family, const DashOptions& options, int64_t rows, int64_t cols) {
  switch (family) {
    case PreconditionerType::Shampoo:
      return std::make_unique<ShampooReference>(options, rows, cols);
    case PreconditionerType::SpectralDescent:
      return std::make_unique<SpectralDescentReference>(options, rows, cols);
  }
  TORCH_CHECK(false, "no reference for preconditioner family ", static_cast<int>(family));
}

/// A matrix parameter `w` (float64, updated in place) trained by the engine's step
/// with Adam grafting around the family's blocks of at most B × B, on `gradients`
/// (one per step). Bias correction on, no momentum or weight decay.
inline void reference_training(
    PreconditionerType family, const DashOptions& options, at::Tensor& w, const std::vector<at::Tensor>& gradients) {
  const int64_t b = options.block_size();
  struct Block {
    int64_t row, col, rows, cols;
    std::unique_ptr<ReferenceBlock> family;
    at::Tensor ema, graft;
  };
  std::vector<Block> blocks;
  for (int64_t row = 0; row < w.size(0); row += b) {
    for (int64_t col = 0; col < w.size(1); col += b) {
      const auto rows = std::min(b, w.size(0) - row), cols = std::min(b, w.size(1) - col);
      blocks.push_back({row, col, rows, cols, reference_block(family, options, rows, cols),
          at::zeros({rows, cols}, at::kDouble), at::zeros({rows, cols}, at::kDouble)});
    }
  }
  for (size_t step = 0; step < gradients.size(); ++step) {
    const auto t = static_cast<int64_t>(step) + 1;
    for (auto& block : blocks) {
      const auto g = gradients[step].narrow(0, block.row, block.rows).narrow(1, block.col, block.cols);
      block.family->update(g);
      const bool due = t >= options.start_step() && (t - options.start_step()) % options.root_frequency() == 0;
      if (due) block.family->refresh();
      block.ema = options.beta_grad() * block.ema + (1.0 - options.beta_grad()) * g;
      block.graft = options.beta_graft() * block.graft + (1.0 - options.beta_graft()) * g * g;
      const auto ghat = block.ema / (1.0 - std::pow(options.beta_grad(), t));
      const auto adam = ghat / ((block.graft / (1.0 - std::pow(options.beta_graft(), t))).sqrt() + options.eps_graft());
      auto p = adam;
      if (t >= options.start_step()) {
        const auto u = block.family->direction(ghat);
        p = u * (adam.norm() / (u.norm() + 1e-16));
      }
      w.narrow(0, block.row, block.rows).narrow(1, block.col, block.cols).sub_(options.lr() * p);
    }
  }
}

}  // namespace dash::testing
