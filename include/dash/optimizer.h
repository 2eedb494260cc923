#pragma once

#if defined(DASH_LAYER_LINALG) || defined(DASH_LAYER_BLOCKING) || defined(DASH_LAYER_DISTRIBUTED)
#error "dash layering: <dash/optimizer.h> belongs to the optim layer (docs/architecture.md)"
#endif

// dash::Dash — batched block Shampoo (DASH) as a torch::optim::Optimizer: the
// batched block preconditioning of "DASH: Faster Shampoo via Batched Block
// Preconditioning and Efficient Inverse-Root Solvers" (arXiv 2602.02016) on top of
// Distributed Shampoo's step with grafting; the root solvers are <dash/inverse_root.h>.

#include <dash/inverse_root.h>
#include <dash/root_method_choice.h>

#include <torch/arg.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace dash {
class DistributedContext;  // <dash/distributed.h>

/// Direction whose per-block norm the Shampoo update is scaled to (spec §4 step 6).
enum class GraftingType { Adam, RMSprop, AdaGrad, SGD, None };

/// What happens to parameters that are 1-D after squeezing size-1 dimensions.
enum class OneDimensional {
  AdamW,      ///< AdamW with `adamw_betas` / `adamw_eps` (0-D parameters always use it)
  Shampoo1D,  ///< segments of ≤ block_size, one factor L = EMA(g gᵀ) each, root 2
};

/// How the blocks are processed.
/// (The values are stored in checkpoints: new ones go at the end.)
enum class Execution {
  Batched,     ///< one batched call per stack (DASH)
  Sequential,  ///< one block at a time, per-matrix calls (the Distributed Shampoo baseline)
  /// Batched, except that each factor stack's inverse roots are computed batched or
  /// one block at a time, whichever a timing at that stack's second root computation
  /// finds faster on the device in use (kept from then on, saved in checkpoints,
  /// shown in diagnostics()). On a CPU both ways give bitwise the same roots.
  Auto,
};

/// What a non-finite gradient does. Either way one scalar is read back per step.
enum class NonFiniteGradients { Error, SkipStep };

struct DashOptions : public torch::optim::OptimizerCloneableOptions<DashOptions> {
  using betas_t = std::tuple<double, double>;

  DashOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor): like AdamWOptions

  TORCH_ARG(double, lr) = 1e-3;
  /// β_G: EMA of the gradient (momentum of Ĝ).
  TORCH_ARG(double, beta_grad) = 0.9;
  /// β_LR: EMA of the factors L, R; 1 means plain sums (AdaGrad style).
  TORCH_ARG(double, beta_factor) = 0.95;
  /// β_g: EMA of the grafting statistic (Adam, RMSprop).
  TORCH_ARG(double, beta_graft) = 0.95;
  TORCH_ARG(double, eps_graft) = 1e-8;
  TORCH_ARG(int64_t, block_size) = 1024;
  /// f: inverse roots are recomputed at start_step and every f steps after it.
  TORCH_ARG(int64_t, root_frequency) = 10;
  /// t_start: first preconditioned step; before it the step is the grafting direction.
  TORCH_ARG(int64_t, start_step) = 10;
  /// Solver, scaling, precision and ε of the inverse roots.
  TORCH_ARG(InverseRootOptions, root) = InverseRootOptions();
  /// Root per side; 0: 4 for matrices (spec's L^{-1/4} G R^{-1/4}), 2 for 1-D Shampoo.
  TORCH_ARG(int64_t, exponent_override) = 0;
  TORCH_ARG(GraftingType, grafting) = GraftingType::Adam;
  TORCH_ARG(double, momentum) = 0.0;
  TORCH_ARG(bool, nesterov) = false;
  /// Decoupled weight decay W ← W(1 − lr·wd).
  TORCH_ARG(double, weight_decay) = 0.0;
  /// Whether 1-D (and 0-D) parameters are decayed too.
  TORCH_ARG(bool, decay_one_dimensional) = false;
  TORCH_ARG(bool, bias_correction) = true;
  TORCH_ARG(OneDimensional, one_dimensional) = OneDimensional::AdamW;
  TORCH_ARG(betas_t, adamw_betas) = std::make_tuple(0.9, 0.95);
  TORCH_ARG(double, adamw_eps) = 1e-8;
  TORCH_ARG(Execution, execution) = Execution::Auto;
  TORCH_ARG(NonFiniteGradients, non_finite_gradients) = NonFiniteGradients::Error;
  /// Bounded failures: once some factor's inverse root has failed this many root
  /// computations in a row (a failed root keeps the previous one), the next step()
  /// raises before it changes anything. 0: never (the default). Checked within the
  /// step's one read back; single process only (an error with several ranks).
  TORCH_ARG(int64_t, max_consecutive_root_failures) = 0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override;
  void set_lr(const double lr) override;
};

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
  /// RootMethod::Auto: the time and error of every method it compared (empty after
  /// a checkpoint is loaded: the choice is saved, the trials are not).
  std::vector<RootMethodTrial> root_method_trials{};
  /// EVD with eigen_refresh_tolerance > 0 (InverseRootOptions), over all root
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

struct DashDiagnostics {
  std::vector<FactorStackDiagnostics> factor_stacks;
  std::vector<BlockStackDiagnostics> block_stacks;
  int64_t skipped_steps = 0;  ///< steps skipped for non-finite gradients
  /// Scratch memory kept across steps and not counted in state_bytes(): the root
  /// solvers' reusable temporaries (a few stacks of the largest factor size).
  int64_t workspace_bytes = 0;
  int64_t steps_taken = 0;  ///< step() calls that updated the state (skipped ones not included)
  /// Steps skipped because a finite gradient entry was so large that the float32
  /// statistics (G Gᵀ, Gᵀ G, the grafting g²) would overflow (see Dash::step).
  int64_t overflow_skipped_steps = 0;
};

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
  /// statistic, so training goes on from the next ordinary gradient.
  at::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  /// Failure counters and skip counts; reads a few scalars back from the device.
  /// Distributed: the stacks and failures of this rank's blocks.
  DashDiagnostics diagnostics() const;

  /// Optimizer state held by this process, in bytes (factors, roots, moments,
  /// statistics). Distributed: this rank's share, ≈ 1/world_size of the whole.
  int64_t state_bytes() const;

  /// Bytes this rank sends plus receives in each step's all-gather; 0 in a single process.
  int64_t communicated_bytes_per_step() const;

  /// Splits the host time of the following steps into phases (copies, factors,
  /// roots, grafting, preconditioning, communication); enabling resets the totals.
  /// Nothing waits for the device, so on a CPU this is the step's own split and on
  /// an accelerator the time spent issuing each phase. Every phase is also a
  /// profiler scope "dash::<phase>" (always, at no cost without a profiler), which
  /// device-side profilers show.
  void profile_phases(bool enabled);
  std::map<std::string, double> phase_times_ms() const;

 private:
  /// A fresh state for the param groups as they are (only before the first step).
  void rebuild_engine();

  class Impl;  // the state and the step (src/optim/), not part of the API
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const DistributedContext> distributed_;
};

// Names, for command lines, config files and reports: to_string() gives the
// canonical one; parse_*() is case-insensitive and rejects an unknown name with
// the list of valid ones (c10::Error).
std::string to_string(GraftingType grafting);
std::string to_string(Execution execution);
std::string to_string(OneDimensional treatment);
std::string to_string(NonFiniteGradients policy);
/// "adam", "rmsprop", "adagrad", "sgd", "none".
GraftingType parse_grafting_type(const std::string& name);
/// "auto", "batched", "sequential".
Execution parse_execution(const std::string& name);
/// "adamw", "shampoo-1d".
OneDimensional parse_one_dimensional(const std::string& name);
/// "error", "skip-step".
NonFiniteGradients parse_non_finite_gradients(const std::string& name);

}  // namespace dash
