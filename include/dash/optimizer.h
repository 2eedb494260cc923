#pragma once

#if defined(DASH_LAYER_KERNELS) || defined(DASH_LAYER_LINALG) || defined(DASH_LAYER_BLOCKING) || \
    defined(DASH_LAYER_DISTRIBUTED)
#error "dash layering: <dash/optimizer.h> belongs to the optim layer (docs/architecture.md)"
#endif

// dash::Dash — batched block Shampoo (DASH) as a torch::optim::Optimizer: the
// batched block preconditioning of "DASH: Faster Shampoo via Batched Block
// Preconditioning and Efficient Inverse-Root Solvers" (arXiv 2602.02016) on top of
// Distributed Shampoo's step with grafting; the root solvers are <dash/inverse_root.h>.

#include <dash/inverse_root.h>
#include <dash/optimizer_options.h>
#include <dash/root_method_choice.h>

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dash {
class DistributedContext;  // <dash/distributed.h>

/// Health of one factor stack (all factors of one size in one parameter group).
struct FactorStackDiagnostics {
  int64_t group = 0;
  int64_t size = 0;      ///< b of the (N, b, b) stack
  int64_t count = 0;     ///< N
  int64_t root = 0;      ///< p of the inverse root
  int64_t failures = 0;  ///< factor-roots kept from before because the new one failed
  /// How its roots are computed: Batched or Sequential (one block at a time); Auto
  /// until Execution::Auto has timed both.
  Execution execution = Execution::Batched;
  double calibrated_batched_ms = 0.0;    ///< Auto: the batched root computation it timed
  double calibrated_per_block_ms = 0.0;  ///< Auto: one block at a time, extrapolated to the stack
  /// The root method its roots are computed with: the configured one, or
  /// RootMethod::Auto's choice (Auto until it is made).
  RootMethod root_method = RootMethod::EVD;
  /// How NewtonDB computes this stack's roots where root_method is NewtonDB (for
  /// other methods, how it would): Matmuls or Eigh, NewtonDBEvaluation::Auto resolved
  /// for the stack's device and precision (resolve_newton_db_evaluation()).
  NewtonDBEvaluation newton_db_evaluation = NewtonDBEvaluation::Matmuls;
  /// RootMethod::Auto: the time and error of every method it compared (empty after
  /// a checkpoint is loaded: the choice is saved, the trials are not).
  std::vector<RootMethodTrial> root_method_trials{};
  /// EVD with eigen().refresh_tolerance() > 0 (InverseRootOptions), over all root
  /// computations so far: roots whose eigenbasis was kept, warm-started (QR
  /// steps) or recomputed by eigh.
  int64_t roots_kept = 0;
  int64_t roots_warm_started = 0;
  int64_t roots_recomputed = 0;
  /// Factors found overflowed (or above FLT_MAX/(16 b), about to) at a root
  /// computation and restarted from zero.
  int64_t factor_resets = 0;
};

/// One stack of equal-shaped gradient blocks.
struct BlockStackDiagnostics {
  int64_t group = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t count = 0;
  bool one_sided = false;  ///< 1-D Shampoo segment: L only
};

/// One parameter's state: (name, tensor) entries (Dash::parameter_state).
using ParameterState = std::vector<std::pair<std::string, at::Tensor>>;

/// The optimizer's step counters, which a state keyed by parameter carries besides
/// the parameters' entries (DashDiagnostics has the same three).
struct StepCounts {
  int64_t steps_taken = 0;
  int64_t skipped_steps = 0;
  int64_t overflow_skipped_steps = 0;
};

struct DashDiagnostics {
  std::vector<FactorStackDiagnostics> factor_stacks;
  std::vector<BlockStackDiagnostics> block_stacks;
  int64_t skipped_steps = 0;  ///< steps skipped for non-finite gradients
  /// Memory, in bytes (docs/python.md, "Memory"). The optimizer state (what
  /// state_bytes() returns, what a checkpoint holds):
  int64_t state_bytes = 0;
  /// Memory kept across steps besides the state: the root solvers' and the blocks'
  /// reusable buffers (chunks of the stacks within workspace_limit; without a limit
  /// the gathered gradients and every stack's updates), the AdamW parameters'
  /// gradients and updates, a 16-bit preconditioning_precision's rounded roots,
  /// and a distributed rank's exchange buffers.
  int64_t workspace_bytes = 0;
  /// Of workspace_bytes, what a workspace limit does not divide into chunks and so
  /// does not bound: the 1-D parameters' AdamW buffers, a rank's exchange buffers.
  int64_t unchunked_workspace_bytes = 0;
  /// The last step's workspace budget (DashOptions::workspace_limit resolved); 0: no limit.
  int64_t workspace_limit_bytes = 0;
  /// The last step's peak of memory held above what was held when it began (its
  /// temporaries, and workspace it added), measured by the allocators' reporting
  /// hook when Dash::profile_memory(true) is on; -1 otherwise, and when a profiler
  /// held the hook. So a step's memory beyond the state peaks at
  /// workspace_bytes + step_peak_bytes.
  int64_t step_peak_bytes = -1;
  int64_t steps_taken = 0;  ///< step() calls that updated the state (skipped ones not included)
  /// Steps skipped because a finite gradient entry was so large that the float32
  /// statistics (G Gᵀ, Gᵀ G, the grafting g²) would overflow (see Dash::step).
  int64_t overflow_skipped_steps = 0;
};

/// Threads: step(), step_with_options(), save(), load(), load_resharded(),
/// load_parameter_states(), parameter_state(), add_param_group(), diagnostics() and
/// the byte counts of one Dash take a lock, so a step is atomic (parameter_state()'s
/// views are read outside it):
/// several threads stepping one optimizer take turns (as under Python's GIL with
/// torch.optim), none sees a half-updated state. A step reads each parameter's
/// gradient once, when it begins (step_with_options: the caller's reading), and
/// holds it for the step: a thread that gives a parameter a new gradient (or none)
/// meanwhile changes the next step's. Editing param groups while another thread
/// steps is not covered (the step reads the options when it begins).
class Dash : public torch::optim::Optimizer {
 public:
  explicit Dash(std::vector<torch::optim::OptimizerParamGroup> param_groups, DashOptions defaults = {});
  explicit Dash(std::vector<at::Tensor> params, DashOptions defaults = {});
  /// Distributed DASH (<dash/distributed.h>): this rank keeps the state of and
  /// computes the updates for its share of the blocks; every step all-gathers the
  /// updates. Gradients must be identical on all ranks when step() is called.
  /// A null context is the single-process optimizer.
  Dash(std::vector<torch::optim::OptimizerParamGroup> param_groups, DashOptions defaults,
      std::shared_ptr<const DistributedContext> distributed);
  Dash(std::vector<at::Tensor> params, DashOptions defaults, std::shared_ptr<const DistributedContext> distributed);
  ~Dash() override;

  /// One step. A gradient with a NaN/Inf entry raises or skips the step
  /// (non_finite_gradients). A finite gradient whose largest entry would overflow
  /// the float32 statistics (above √(FLT_MAX/16)/B ≈ 4.6e18/B, B the largest block
  /// side; 4.6e18 without blocks) skips the step with a warning and is counted in
  /// diagnostics().overflow_skipped_steps: the state never holds an overflowed
  /// statistic, so training goes on from the next ordinary gradient. Groups with
  /// NonFiniteGradients::Unchecked are left out of both checks.
  at::Tensor step(LossClosure closure = nullptr) override;
  /// One step with `changed_options` as the param groups' new options (one entry per
  /// group: the group's new options, or none where they did not change), swapped in
  /// under the step's lock; the given ones are checked first, the others are not
  /// checked again; a step that raises leaves the previous options in place. For
  /// bindings that keep the options apart from the groups and convert only what
  /// changed (the Python package: its param groups' mirror). `gradients`: every
  /// parameter's, in the param groups' order (undefined: none), as the caller read
  /// them where that is safe (Python's binding, under the GIL); empty: read here.
  void step_with_options(
      std::vector<std::optional<DashOptions>> changed_options, std::vector<at::Tensor> gradients = {});
  /// How many group option sets step_with_options() has taken (converted and
  /// checked): a step of unchanged groups takes none.
  int64_t option_updates() const { return option_updates_; }
  /// torch::save(optimizer, path) writes this process's state: the groups' options,
  /// the step counters and every parameter's state as parameter_state() gives it (on
  /// a rank of several, the entries of the blocks it owns). load() takes such an
  /// archive wherever it holds the entries of this process's blocks: its own, or one
  /// a single process wrote; an archive of one rank of several on another world size
  /// lacks some, and load_resharded() takes every rank's. Archives of the format
  /// written until 2026-12-07 still load (the same rank of the same world size).
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  /// Loads a checkpoint written on any number of ranks into this optimizer on any
  /// number: `shards` are the archives every rank of the writing run saved, in rank
  /// order (one for a single process), and each rank of this run takes the state of
  /// the blocks it owns now. The options are the shards' (they agree); the choices of
  /// Execution::Auto and RootMethod::Auto are kept where every block's old stack made
  /// the same one. Changes nothing when a shard does not fit.
  void load_resharded(std::vector<torch::serialize::InputArchive>& shards);

  /// Adds a parameter group. Before the first step the state is planned anew for all
  /// groups (on several ranks a collective: every rank adds the group); after it (progressive unfreezing, a head added in fine-tuning) the
  /// existing state is kept bit for bit and the new group's blocks start fresh
  /// (single process only: ranks would split the blocks anew). Checks the group's
  /// parameters and options as the constructor does, and leaves the optimizer
  /// unchanged when they fail. (Hides torch::optim::Optimizer's non-virtual method: a
  /// call through a base reference skips the checks and, after the first step, the
  /// new group's state until the next step, which then refuses the changed parameters.)
  void add_param_group(const torch::optim::OptimizerParamGroup& param_group);

  /// Failure counters and skip counts; reads a few scalars back from the device.
  /// Distributed: the stacks and failures of this rank's blocks.
  DashDiagnostics diagnostics() const;

  /// Optimizer state held by this process, in bytes (factors, roots, moments,
  /// statistics). Distributed: this rank's share, ≈ 1/world_size of the whole.
  int64_t state_bytes() const;

  /// The state of parameter `index` (counted over the param groups in order), as
  /// views of the live state, under names that do not depend on the world size
  /// (docs/python.md, "State and checkpoints"). A preconditioned parameter's blocks
  /// are numbered j = 0, 1, ... (shape by shape in stack order, then by position);
  /// block j has
  /// "block.<j>.factor_left", "block.<j>.root_left" and, unless one-sided,
  /// "..._right" ((b, b) each), "block.<j>.grad_ema", "block.<j>.graft_stat",
  /// "block.<j>.momentum" ((rows, cols)) and "block.<j>.step" ((1, 1)),
  /// "consecutive_failures_<side>" and, where the options may warm-start EVD,
  /// "eigenvectors_<side>" and "eigenbasis_valid_<side>" (zeros, copies, until the
  /// first root computation allocates them), plus "root_choice_<side>" (a copy:
  /// Execution::Auto's and RootMethod::Auto's choices for its factor's stack as
  /// numbers). An AdamW
  /// parameter has "grad_ema", "graft_stat", "momentum" and "step" in its own shape.
  /// Entries the options do not keep are absent; on a rank of several, only the
  /// blocks this rank owns (none: empty). The views follow the state until it is
  /// rebuilt (a load, a precision change, add_param_group, an edit of a state-shaping
  /// option before the first step).
  ParameterState parameter_state(size_t index) const;
  /// Loads every parameter's state as parameter_state() gives it, with the param
  /// groups' options `group_options` (the ones the state was built with) and the
  /// step counters. The states may come from any world size: a rank takes the
  /// entries of the blocks it owns and ignores the others, so on several ranks each
  /// needs the union of the writing ranks' states (or the entries of its blocks).
  /// Throws, naming the parameter and entry, when an entry is missing, unknown or of
  /// another shape or dtype, and then changes nothing.
  void load_parameter_states(const std::vector<DashOptions>& group_options, const std::vector<ParameterState>& states,
      const StepCounts& counts);

  /// Bytes this rank sends plus receives in each step's exchanges (the updates'
  /// all-gather; under DistributionScheme::Zero also the gradients' all-to-all), by
  /// their buffers' sizes; 0 in a single process.
  int64_t communicated_bytes_per_step() const;

  /// Splits the host time of the following steps into phases (copies, factors,
  /// roots, grafting, preconditioning, communication); enabling resets the totals.
  /// Nothing waits for the device, so on a CPU this is the step's own split and on
  /// an accelerator the time spent issuing each phase. Every phase is also a
  /// profiler scope "dash::<phase>" (always, at no cost without a profiler), which
  /// device-side profilers show.
  void profile_phases(bool enabled);
  std::map<std::string, double> phase_times_ms() const;

  /// Measures the peak of temporary tensor memory of each following step
  /// (diagnostics().step_peak_bytes) through c10's memory-reporting hook, the one
  /// the PyTorch profiler's profile_memory uses: every allocation then takes a lock.
  /// As under that profiler, a step that frees CPU memory allocated before it may
  /// make LibTorch log "Memory block of unknown size..." (once per thousand such
  /// frees), and that free is not counted, so the peak can only be overstated.
  /// Nothing is measured while a profiler is active.
  void profile_memory(bool enabled);

 private:
  /// A fresh state for the param groups as they are (only before the first step).
  void rebuild_engine();
  /// load() (this rank's archive) and load_resharded() (every rank's, in rank order).
  void load_archives(const std::vector<torch::serialize::InputArchive*>& archives, bool resharded);
  class Impl;  // the state and the step (src/optim/), not part of the API
  /// A fresh engine for the checkpoint's `options`, filled by `read`; installed with
  /// the options only once `read` has returned (a load that throws changes nothing).
  void install_loaded(const std::vector<DashOptions>& options,
      const std::function<void(Impl&, const std::vector<torch::optim::OptimizerParamGroup>&)>& read);
  /// step() after the closure, with the lock held; `check_groups`: check every
  /// group's options first (C++ callers may have edited them in place).
  void step_locked(bool check_groups, std::vector<at::Tensor> gradients);
  /// Every parameter's gradient now, in the param groups' order (undefined: none).
  std::vector<at::Tensor> current_gradients() const;

  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const DistributedContext> distributed_;
  /// Taken by every call that reads or changes the state (held by pointer: a Dash stays movable).
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
  int64_t option_updates_ = 0;
};

}  // namespace dash
