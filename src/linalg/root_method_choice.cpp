// RootMethod::Auto's calibration: every method is timed on the
// stack and its error measured on a sample against float64 eigh, weighted by the
// factor itself (root_method_choice.h says why).

#include <dash/root_method_choice.h>
#include <dash/solver_cost.h>

#include "common/device_clock.h"
#include "linalg/batched_matmul.h"
#include "kernels/stack_reductions.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

namespace dash {
namespace {

constexpr int64_t kReferenceSample = 8;
// A solve faster than this is timed twice more and the fastest run kept: small
// stacks take milliseconds, where one run is mostly noise.
constexpr double kRetimeBelowMs = 100.0;
// Methods within this factor of the fastest eligible one count as equally fast;
// the most accurate of them is taken (so that noise does not flip the choice).
constexpr double kSameSpeed = 1.1;

// The exact roots of a sample of the stack, and the weight A₊^{1/2} (up to a
// rotation, which the Frobenius norm does not see) the errors are measured with.
struct Reference {
  at::Tensor rows;       // (n,) int64: which matrices of the stack
  at::Tensor root;       // (n, b, b) float64: (A₊ + εI)^{-1/p}
  at::Tensor weight;     // (n, b, b) float64: V Λ₊^{1/2}, so ‖Y V Λ₊^{1/2}‖_F = ‖Y A₊^{1/2}‖_F
  at::Tensor root_norm;  // (n,) ‖X* A₊^{1/2}‖_F
};

// Up to kReferenceSample of the finite matrices, evenly spread over the stack.
at::Tensor sample_rows(const at::Tensor& finite) {
  auto candidates = finite.nonzero().view({-1}).cpu();  // host read: calibration only
  const auto available = candidates.numel();
  if (available <= kReferenceSample) return candidates;
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < kReferenceSample; ++i) {
    picked.push_back(candidates[i * (available - 1) / (kReferenceSample - 1)].item<int64_t>());
  }
  return at::tensor(picked, at::kLong);
}

Reference exact_roots(
    const at::Tensor& matrices, const at::Tensor& rows, int64_t p, const InverseRootOptions& options) {
  // Eigenvalues below b·u·λ_max (u: the input's unit roundoff) are the input's
  // rounding, indistinguishable from 0: no method can get their root right, so they
  // carry no weight (a rank-deficient factor's null space has ~1e-8·λ_max there in float32).
  const double roundoff = linalg::unit_roundoff(matrices.scalar_type());
  auto a = matrices.index_select(0, rows.to(matrices.device())).to(at::kDouble);
  a = (a + a.transpose(1, 2)) * 0.5;
  auto [values, vectors] = at::linalg_eigh(a);
  auto clipped = values.clamp_min(0.0);
  auto resolved = clipped > clipped.amax(-1, /*keepdim=*/true) * (roundoff * static_cast<double>(matrices.size(-1)));
  // At ε = 0 a singular matrix has no root; its null directions carry no weight,
  // and a floor of 1e-16·λ_max keeps their 0·∞ out of the sums.
  const auto largest = clipped.amax(-1, /*keepdim=*/true);
  auto floor = largest.mul(1e-16).clamp_min(std::numeric_limits<double>::min());
  // The regularisation asked for: max(ε, ε_rel·λ_max).
  auto regularisation = largest.mul(options.relative_epsilon()).clamp_min(options.epsilon());
  auto inverse_root_values = at::maximum(clipped + regularisation, floor).pow(-1.0 / static_cast<double>(p));
  auto root = at::matmul(vectors * inverse_root_values.unsqueeze(-2), vectors.transpose(1, 2));
  auto weight = vectors * at::where(resolved, clipped, at::zeros_like(clipped)).sqrt().unsqueeze(-2);
  auto root_norm = at::linalg_vector_norm(at::matmul(root, weight), 2, {1, 2});
  return {rows, root, weight, root_norm};
}

// max over the sample of ‖(X − X*) A₊^{1/2}‖_F / ‖X* A₊^{1/2}‖_F (0 for a zero matrix).
double weighted_error(const at::Tensor& root, const Reference& reference) {
  auto x = root.index_select(0, reference.rows.to(root.device())).to(at::kDouble).to(reference.root.device());
  auto difference = at::linalg_vector_norm(at::matmul(x - reference.root, reference.weight), 2, {1, 2});
  auto relative = difference / reference.root_norm.clamp_min(std::numeric_limits<double>::min());
  const double error = relative.max().item<double>();
  return std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
}

RootMethodTrial run_trial(RootMethod method, const at::Tensor& matrices, const at::Tensor& finite, int64_t p,
    const InverseRootOptions& options, const Reference& reference, InverseRootWorkspace& workspace) {
  RootMethodTrial trial{method, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()};
  auto trial_options = options;
  trial_options.method(method);
  try {
    check_inverse_root_options(p, trial_options);
  } catch (const c10::Error&) {
    return trial;  // a root this method does not compute (NewtonDB: p not a power of two)
  }
  try {
    common::wait_for_device(inverse_root(matrices.narrow(0, 0, 1), p, trial_options, workspace));  // library start-up
    at::Tensor root;
    for (int run = 0; run < 3 && (run == 0 || trial.milliseconds < kRetimeBelowMs); ++run) {
      root = at::Tensor();  // its workspace memory is free for the next run
      const auto start = std::chrono::steady_clock::now();
      root = inverse_root(matrices, p, trial_options, workspace);
      common::wait_for_device(root);
      const double ms = common::milliseconds_since(start);
      trial.milliseconds = run == 0 ? ms : std::min(trial.milliseconds, ms);
    }
    // Diverged: a root of a finite matrix that the optimizer would not take.
    auto rejected = kernels::acceptable_roots(root, options.epsilon(), p).view({-1}).logical_not();
    if (!(rejected & finite).any().item<bool>()) trial.error = weighted_error(root, reference);
  } catch (const c10::Error& error) {
    TORCH_WARN("dash::choose_root_method: ", to_string(method),
        " failed on this stack and is not chosen: ", error.what_without_backtrace());
  }
  trial.meets_accuracy = trial.error <= options.auto_max_error();
  return trial;
}

}  // namespace

RootMethodChoice choose_root_method(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, InverseRootWorkspace& workspace) {
  TORCH_CHECK(matrices.defined() && matrices.dim() == 3 && matrices.size(1) == matrices.size(2),
      "dash::choose_root_method: expected an (N, b, b) stack, got shape ",
      matrices.defined() ? matrices.sizes() : at::IntArrayRef{});
  TORCH_CHECK(matrices.size(0) > 0, "dash::choose_root_method: the stack is empty");
  auto finite = at::isfinite(matrices).all(-1).all(-1);
  const auto rows = sample_rows(finite);
  TORCH_CHECK(rows.numel() > 0, "dash::choose_root_method: no matrix of the stack is finite");
  const auto reference = exact_roots(matrices, rows, p, options);

  RootMethodChoice choice;
  for (auto method : kSolverMethods) {
    choice.trials.push_back(run_trial(method, matrices, finite, p, options, reference, workspace));
  }
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& trial : choice.trials) {
    if (trial.meets_accuracy) fastest = std::min(fastest, trial.milliseconds);
  }
  const RootMethodTrial* best = nullptr;
  for (const auto& trial : choice.trials) {
    if (trial.meets_accuracy && trial.milliseconds <= kSameSpeed * fastest &&
        (best == nullptr || trial.error < best->error)) {
      best = &trial;
    }
  }
  if (best == nullptr) {
    best = &choice.trials.front();
    for (const auto& trial : choice.trials) {
      if (trial.error < best->error) best = &trial;
    }
    std::ostringstream errors;
    for (const auto& trial : choice.trials) errors << " " << to_string(trial.method) << " " << trial.error;
    TORCH_WARN("dash::choose_root_method: no method reaches auto_max_error = ", options.auto_max_error(),
        " on a stack of ", matrices.size(0), " matrices of ", matrices.size(1), "×", matrices.size(1),
        " (errors:", errors.str(), "); taking the most accurate, ", to_string(best->method));
  }
  choice.method = best->method;
  return choice;
}

int64_t choose_root_method_workspace_bytes(
    int64_t count, int64_t b, const InverseRootOptions& options, const at::Device& device) {
  int64_t solver = 0;
  for (auto method : kSolverMethods) {
    solver =
        std::max(solver, inverse_root_workspace_bytes(count, b, InverseRootOptions(options).method(method), device));
  }
  // The last run's root, held while the next candidate runs; the reference: per
  // sampled matrix its float64 copy, eigenvectors, root, weight and products.
  const int64_t matrix = 4 * b * b;
  return solver + count * matrix + std::min(count, kReferenceSample) * 12 * matrix;
}

}  // namespace dash
