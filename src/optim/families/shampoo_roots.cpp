#include "optim/families/shampoo_roots.h"

#include "common/device_clock.h"
#include "kernels/core_ranges.h"
#include "kernels/stack_reductions.h"
#include "kernels/stack_select.h"
#include "optim/host_masks.h"
#include "optim/state_precision.h"

#include <dash/solver_cost.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <utility>

namespace dash::optim {
namespace {

// One stack's root computation: its options resolved (Auto's method), its warm
// eigenbases, and the chunks it runs over.
class StackRoots {
 public:
  StackRoots(const blocking::FactorStack& stack, const DashOptions& options, const WorkspaceBudget& budget,
      const std::vector<bool>& due, FactorStackState& state, RootBuffers& buffers)
      : stack_(stack), options_(options), budget_(budget), due_(due), state_(state), buffers_(buffers) {}

  void run();

 private:
  void refresh(int64_t first, int64_t length, const at::Tensor& due_mask);
  void one_at_a_time();
  void batched();
  void calibrate_execution();
  void choose_method();

  const blocking::FactorStack& stack_;
  const DashOptions& options_;
  const WorkspaceBudget& budget_;
  const std::vector<bool>& due_;
  FactorStackState& state_;
  RootBuffers& buffers_;
  InverseRootOptions root_options_;
  bool warm_eigen_ = false;
};

void StackRoots::run() {
  root_options_ = options_.root();
  if (root_options_.method() == RootMethod::Auto) {
    if (state_.root_method == RootMethod::Auto) choose_method();
    root_options_.method(state_.root_method == RootMethod::Auto ? RootMethod::EVD : state_.root_method);
  }
  warm_eigen_ = root_options_.method() == RootMethod::EVD && root_options_.eigen().refresh_tolerance() > 0.0;
  if (warm_eigen_) allocate_factor_fields(state_, FactorPresence::WarmStart);
  allocate_factor_fields(state_, FactorPresence::FirstRoot);
  auto execution = options_.execution() == Execution::Auto ? state_.root_execution : options_.execution();
  if (execution == Execution::Auto && state_.calibration_pending) {
    // The first computation fills the solvers' workspace; the second is timed.
    state_.calibration_pending = false;
    execution = Execution::Batched;
  }
  switch (execution) {
    case Execution::Sequential:
      one_at_a_time();
      break;
    case Execution::Batched:
      batched();
      break;
    case Execution::Auto:
      calibrate_execution();
      break;
  }
}

// The roots of factors [first, first + length), where `due_mask` (undefined: all of
// them) says which are due.
void StackRoots::refresh(int64_t first, int64_t length, const at::Tensor& due_mask) {
  auto part = [&](const at::Tensor& full) { return full.narrow(0, first, length); };
  auto part_factors = part(state_.factors);
  auto part_roots = part(state_.roots);
  auto part_failures = part(state_.consecutive_failures);
  at::Tensor part_vectors, part_valid;
  Eigenbasis basis;
  if (warm_eigen_) {
    part_vectors = part(state_.eigenvectors);
    part_valid = part(state_.eigenbasis_valid);
    basis = {part_vectors, part_valid, {}};  // replaced by the new basis
  }
  at::Tensor fresh;
  try {
    // bfloat16 factors are widened into a blocks' buffer (factors_per_chunk counts
    // it in the roots' share).
    const auto factors = widened(part_factors, buffers_.scratch);
    fresh = warm_eigen_ ? inverse_root(factors, stack_.root, root_options_, buffers_.solvers, basis)
                        : inverse_root(factors, stack_.root, root_options_, buffers_.solvers);
  } catch (const c10::Error& error) {
    TORCH_WARN("dash::Dash: inverse root of a ", stack_.size, "×", stack_.size,
        " factor stack failed; keeping the previous roots: ", error.what_without_backtrace());
    auto failed = due_mask.defined() ? due_mask : at::ones({length}, state_.factors.options().dtype(at::kBool));
    state_.failures.add_(failed.sum());
    part_failures.add_(failed);
    return;
  }
  // A diverged root (non-finite, or finite far above the bound) would turn the
  // update into Inf and the parameters into NaN.
  auto ok = kernels::acceptable_roots(fresh, root_options_.epsilon(), stack_.root).view({-1});
  if (due_mask.defined()) ok = ok & due_mask;
  auto failed = due_mask.defined() ? (due_mask & ~ok) : ~ok;
  state_.failures.add_(failed.sum());
  part_failures.add_(failed).masked_fill_(ok, 0);
  kernels::copy_matrices_where(part_roots, ok, fresh.to(part_roots.scalar_type()));
  // A factor that overflowed would fail every root after it (an EMA keeps the
  // Inf): it restarts from zero, as a new block's, and keeps its last good root.
  // So does one about to overflow (plain sums grow without bound): above
  // FLT_MAX/(16 b) the solvers' spectral scale (≤ margin · b · max |a_ij|) would.
  const double near_overflow = static_cast<double>(std::numeric_limits<float>::max()) / (16.0 * stack_.size);
  auto overflowed = (kernels::largest_magnitude(part_factors) <= near_overflow).view({-1}).logical_not();
  if (due_mask.defined()) overflowed = overflowed & due_mask;
  kernels::fill_matrices_where(part_factors, overflowed, 0.0);
  const auto resets = overflowed.sum();
  state_.factor_resets.add_(resets);
  buffers_.factor_resets_total.add_(resets);
  if (warm_eigen_) {
    // Only the factors whose root was taken move to their new basis.
    kernels::copy_matrices_where(part_vectors, ok, basis.vectors);
    at::where_out(part_valid, ok, basis.valid, part_valid);
    part_valid.masked_fill_(overflowed, false);
    state_.refresh_counts.add_(at::one_hot(basis.status, 3).mul_(ok.unsqueeze(1)).sum(0));
  }
}

void StackRoots::one_at_a_time() {
  for (int64_t i = 0; i < stack_.count; ++i) {
    if (due_[i]) refresh(i, 1, at::Tensor());
  }
}

// Within a workspace limit, over chunks of the stack whose solver temporaries fit
// the roots' share (on a CPU a matrix's root is its own computation, but its
// element-wise powers run in SIMD lanes or in a loop's tail depending on its place
// in the stack: a chunk's roots can differ from the whole stack's in the last bits).
void StackRoots::batched() {
  const int64_t chunk = factors_per_chunk(stack_, state_, root_options_, warm_eigen_, budget_);
  const auto due_count = std::count(due_.begin(), due_.end(), true);
  // The mask goes to the device once, not once per chunk.
  const auto due_mask = due_count == stack_.count ? at::Tensor() : bool_mask(due_, state_.factors.device());
  for (int64_t first = 0; first < stack_.count; first += chunk) {
    const int64_t length = std::min(chunk, stack_.count - first);
    const auto chunk_due_count = std::count(due_.begin() + first, due_.begin() + first + length, true);
    if (chunk_due_count == 0) continue;
    refresh(first, length, chunk_due_count == length ? at::Tensor() : due_mask.narrow(0, first, length));
  }
}

// Execution::Auto, once per factor stack: this root computation runs batched and
// is timed; then the roots of a few due blocks are computed one at a time, timed
// and discarded. One block at a time is kept if, extrapolated to all due blocks,
// it is at least 10 % faster (batching is the default the margin leans to). The
// clock needs the device to have finished, so this reads a value back, once.
void StackRoots::calibrate_execution() {
  using common::milliseconds_since;
  using common::wait_for_device;
  wait_for_device(state_.roots);
  auto start = std::chrono::steady_clock::now();
  batched();
  wait_for_device(state_.roots);
  state_.calibrated_batched_ms = milliseconds_since(start);

  constexpr int64_t kSample = 8;
  std::vector<int64_t> sample;
  for (int64_t i = 0; i < stack_.count && static_cast<int64_t>(sample.size()) < kSample; ++i) {
    if (due_[i]) sample.push_back(i);
  }
  start = std::chrono::steady_clock::now();
  at::Tensor root;
  for (auto i : sample) {
    try {
      root = inverse_root(
          widened(state_.factors.narrow(0, i, 1), buffers_.scratch), stack_.root, root_options_, buffers_.solvers);
    } catch (const c10::Error&) {
      // Counted (and warned about) by the batched computation already.
    }
  }
  wait_for_device(root);
  const auto due_count = std::count(due_.begin(), due_.end(), true);
  state_.calibrated_per_block_ms =
      milliseconds_since(start) * static_cast<double>(due_count) / static_cast<double>(sample.size());
  state_.root_execution =
      state_.calibrated_per_block_ms * 1.1 < state_.calibrated_batched_ms ? Execution::Sequential : Execution::Batched;
}

// RootMethod::Auto, once per factor stack: choose_root_method() on the factors due
// now (a one-off that costs several root computations and host reads). Without a
// workspace limit it runs in a workspace of its own, released afterwards: the
// optimizer's keeps only what the chosen method needs (the union of all four held
// 3× EVD's on llama-tiny). Within a limit it compares the methods on as many due
// factors as fit the roots' share, in the optimizer's workspace (which that share
// bounds whatever the method). A stack without a finite factor to time keeps
// Auto, and this computation uses EVD.
void StackRoots::choose_method() {
  const auto& root_options = options_.root();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < stack_.count; ++i) {
    if (due_[i]) rows.push_back(i);
  }
  const auto device = state_.factors.device();
  if (budget_.bounded()) {
    const auto one = choose_root_method_workspace_bytes(1, stack_.size, root_options, device);
    const auto two = choose_root_method_workspace_bytes(2, stack_.size, root_options, device);
    // The due factors, gathered, and widened where they are bfloat16.
    const auto copy = (state_.factors.scalar_type() == at::kFloat ? 4 : 6) * stack_.size * stack_.size;
    rows.resize(static_cast<size_t>(
        items_per_chunk(static_cast<int64_t>(rows.size()), two - one + copy, 2 * one - two, budget_.roots())));
  }
  auto due_factors = static_cast<int64_t>(rows.size()) == stack_.count
                         ? state_.factors
                         : state_.factors.index_select(0, index_tensor(rows, device));
  due_factors = widened(due_factors, buffers_.scratch);
  try {
    InverseRootWorkspace trial_workspace;
    auto choice = choose_root_method(
        due_factors, stack_.root, root_options, budget_.bounded() ? buffers_.solvers : trial_workspace);
    // The trials left buffers of every method there; the chosen one makes its own.
    if (budget_.bounded()) buffers_.solvers = InverseRootWorkspace();
    state_.root_method = choice.method;
    state_.root_method_trials = std::move(choice.trials);
  } catch (const c10::Error& error) {
    TORCH_WARN("dash::Dash: RootMethod::Auto could not compare the methods on a ", stack_.size, "×", stack_.size,
        " factor stack of group ", stack_.group, " (", error.what_without_backtrace(),
        "); EVD computes its roots this time, and the comparison is tried again at its next root computation");
  }
}

}  // namespace

void refresh_roots(const blocking::FactorStack& stack, const DashOptions& options, const WorkspaceBudget& budget,
    const std::vector<bool>& due, FactorStackState& state, RootBuffers& buffers) {
  StackRoots(stack, options, budget, due, state, buffers).run();
}

int64_t factors_per_chunk(const blocking::FactorStack& stack, const FactorStackState& state,
    const InverseRootOptions& root_options, bool warm_basis, const WorkspaceBudget& budget) {
  if (!budget.bounded()) return stack.count;
  const auto device = state.factors.device();
  const auto one = inverse_root_workspace_bytes(1, stack.size, root_options, device, warm_basis);
  const auto two = inverse_root_workspace_bytes(2, stack.size, root_options, device, warm_basis);
  // bfloat16 state: the factors widened to float32, the new roots rounded.
  const int64_t matrix = stack.size * stack.size;
  const int64_t widened_factors = state.factors.scalar_type() == at::kFloat ? 0 : 4 * matrix;
  const int64_t rounded_roots = state.roots.scalar_type() == at::kFloat ? 0 : 2 * matrix;
  const auto chunk =
      items_per_chunk(stack.count, two - one + widened_factors + rounded_roots, 2 * one - two, budget.roots());
  // An odd chunk of 1024² eigh would leave a core idle for one.
  const auto workers = kernels::stack_lapack_plan(stack.count, device).workers;
  return chunk < stack.count && chunk > workers ? chunk - chunk % workers : chunk;
}

}  // namespace dash::optim
