#pragma once

// The state and the step of dash::Dash. The optimizer class only forwards here;
// the engine's arithmetic is block_update.h, each preconditioner family's its own
// (preconditioner.h, families/), the shape bookkeeping stack_plan.h.

#include <dash/optimizer.h>

#include "blocking/stack_plan.h"
#include "kernels/scratch.h"
#include "optim/adamw_segment.h"
#include "optim/block_state.h"
#include "optim/phase_profile.h"
#include "optim/preconditioner.h"
#include "optim/rows.h"
#include "optim/workspace_budget.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace dash::optim {
class Distributor;
struct StepContext;

struct GradientStackState {
  MomentState moments;  ///< in moment_precision, but for the float32 step counts
  /// Without a workspace limit, the step's gradient of every block, gathered once
  /// and kept from the factor updates to the directions, (count, rows, cols); not
  /// state, not saved. Undefined within a limit: each chunk's blocks are gathered
  /// where they are used.
  at::Tensor gathered{};
  /// 1 − β_G^t and 1 − β_g^t of every block, rewritten in place where t advances
  /// (count_active_blocks); not state, not saved.
  at::Tensor grad_correction{};
  at::Tensor stat_correction{};
  /// The step's blocks with a gradient where they are scattered: their numbers (the
  /// chunks' subsets) and a 0/1 mask (t's increment), on the device, in buffers
  /// kept across steps; not state, not saved.
  at::Tensor active_indices{};
  at::Tensor active_mask{};
};

class Engine {
 public:
  /// Plans stacks for the parameters of `groups` and allocates zero state. With a
  /// distributed context of several ranks, the plan and the state are this rank's
  /// share of the blocks (distributed/work_split.h).
  explicit Engine(const std::vector<torch::optim::OptimizerParamGroup>& groups,
      std::shared_ptr<const DistributedContext> distributed = nullptr);
  ~Engine();

  /// One optimizer step on `gradients`, one per parameter (undefined: none), as the
  /// caller read them from the parameters (StepContext::gradients; held only for
  /// the step).
  void step(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<at::Tensor> gradients);

  bool matches(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;

  /// Rejects edits, after construction, of the options that shaped the state.
  void check_layout(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;
  /// Whether every group's state_layout() is still the one the state was built for.
  bool layout_matches(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;
  /// The first group whose state_layout() differs from the one the state was built for.
  std::optional<size_t> changed_layout_group(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;

  /// The largest gradient entry a step takes: above it G Gᵀ, Gᵀ G (or g²) of the
  /// largest block could overflow float32, with a margin for the root solvers.
  double overflow_limit() const { return overflow_limit_; }

  /// Bytes sent plus received per step by this rank; 0 in a single process.
  int64_t communicated_bytes_per_step() const;

  // Reports (engine_state.cpp). `groups` are the groups the engine was built for.
  DashDiagnostics diagnostics(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;
  /// Bytes of optimizer state (what a checkpoint holds), not counting workspaces.
  int64_t state_bytes() const;
  /// Parameter `index`'s state as views (Dash::parameter_state; engine_parameter_state.cpp);
  /// `groups` are the groups' options now.
  ParameterState parameter_state(size_t index, const std::vector<torch::optim::OptimizerParamGroup>& groups) const;
  /// Bytes kept across steps besides the state: every buffer and workspace.
  int64_t workspace_bytes() const;
  /// Of those, the ones a workspace limit does not divide into chunks: the AdamW
  /// parameters' gradients, updates and buffers, a rank's exchange buffers.
  int64_t unchunked_workspace_bytes() const;
  /// Measures each following step's peak of temporary memory (common/memory_peak.h).
  void profile_memory(bool enabled) { profile_memory_ = enabled; }
  int64_t steps_taken() const { return steps_taken_; }
  StepCounts step_counts() const { return {steps_taken_, skipped_steps_, overflow_skipped_steps_}; }
  size_t parameter_count() const { return params_.size(); }
  PhaseProfile& profile() { return profile_; }
  const PhaseProfile& profile() const { return profile_; }
  /// Takes over the skipped-step counts and the profiling switch of the engine this
  /// one replaces (rebuilt for edited groups before the first step).
  void continue_from(const Engine& previous);
  /// Takes over the whole state of `previous`, an engine for the first groups of
  /// this one's (param groups added since): their stacks come first in this plan
  /// and keep their state bit for bit; the added groups' blocks start fresh. Single
  /// process only (ranks would split the blocks anew).
  void adopt_state(Engine&& previous);

  /// Into a freshly built engine (engine_parameter_state.cpp): every parameter's
  /// state as parameter_state() gives it, on any world size (this engine takes the
  /// entries of the blocks it owns and ignores the others), and the counters.
  /// Throws, naming the parameter and entry, when one is missing, unknown, of
  /// another shape or dtype, or holds values its field may not (a poisoned state).
  /// The one path of every checkpoint into the engine.
  void load_parameter_states(const std::vector<ParameterState>& states, const StepCounts& counts);
  /// The whole plan (every block, as one process plans them) and how each group's
  /// parameters are blocked: what a reader of checkpoints written on other world
  /// sizes needs (legacy_archive.h).
  const blocking::StackPlan& whole_plan() const { return whole_plan_; }
  const std::vector<blocking::GroupBlocking>& group_blockings() const { return blocking_; }

 private:
  /// Per stack of this engine's plan and block: the block's number among its
  /// parameter's blocks in the whole plan (its name in parameter_state()).
  std::vector<std::vector<int64_t>> own_block_numbers() const;
  void decide_parameter_use();
  void allocate_state(const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to);
  void run_step(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<at::Tensor> gradients);
  WorkspaceBudget step_budget(const std::vector<torch::optim::OptimizerParamGroup>& groups) const;
  void convert_state_precision(const StepContext& context);
  bool collect_gradients(StepContext& context);
  void gather_gradients(const StepContext& context);
  /// The family of gradient stack `stack` (its group's preconditioner).
  Preconditioner& family_of(size_t stack) const;
  /// The engine's buffers for a family's work in this step.
  FamilyBuffers family_buffers(const StepContext& context);
  std::vector<at::Tensor> checked_gradients(const StepContext& context) const;
  bool gradients_usable(StepContext& context);
  void raise_option_disagreement(const std::vector<torch::optim::OptimizerParamGroup>& groups);
  void families_resets_into(at::Tensor into) const;
  void announce_factor_resets(int64_t resets);
  /// The families' statistics restarted so far (host reads).
  int64_t resets_so_far() const;
  void count_active_blocks(StepContext& context);
  std::vector<std::vector<Rows>> chunks_per_stack(const StepContext& context);
  at::Tensor gradient_blocks(const StepContext& context, size_t stack, const Rows& rows);
  void update_statistics(StepContext& context, size_t stack, const Rows& rows);
  /// Where Rows::take puts a scattered chunk's copies (null: temporaries).
  kernels::Scratch* subset_scratch(const StepContext& context);
  /// A chunk's buffers for `grad`'s blocks, from the scratch kept across steps.
  Workspace chunk_workspace(const at::Tensor& grad, MatmulPrecision precision);
  /// Forms lr · P of the chosen blocks and hands it to the distributor.
  void write_direction(StepContext& context, size_t stack, const Rows& rows);
  void update_adamw_segment(StepContext& context, size_t segment);
  /// Per parameter, W's factor 1 − lr·wd before its update (spec §4 step 1): 1 for
  /// parameters without decay or without a gradient.
  std::vector<double> weight_decay_factors(const StepContext& context) const;

  blocking::StackPlan plan_;                       ///< this rank's blocks (all blocks in a single process)
  blocking::StackPlan whole_plan_;                 ///< every block, as one process plans them
  std::vector<blocking::GroupBlocking> blocking_;  ///< per group, how its parameters are blocked
  std::shared_ptr<const DistributedContext> distributed_;
  std::vector<at::Tensor> params_;
  std::vector<std::vector<int64_t>> param_shapes_;  // as planned: a parameter's shape may not change
  /// Per parameter: whether this process computes all of its blocks (or its AdamW
  /// segment), some of them (a rank of several), or none.
  enum class ParamUse { None, Whole, Part };
  std::vector<ParamUse> param_use_;
  std::vector<std::vector<int64_t>> block_numbers_;  ///< own_block_numbers()
  std::vector<GradientStackState> stacks_;
  /// Per gradient stack and block: the host's copy of t (which schedules t_start and
  /// the families' amortised work).
  std::vector<std::vector<int64_t>> host_steps_;
  /// The preconditioner families of the groups (one per family some group names),
  /// and each group's.
  std::vector<std::unique_ptr<Preconditioner>> families_;
  std::vector<size_t> family_of_group_;
  std::vector<AdamWSegmentState> segments_;
  int64_t steps_taken_ = 0;
  int64_t skipped_steps_ = 0;           ///< non-finite gradients
  int64_t overflow_skipped_steps_ = 0;  ///< gradients above overflow_limit()
  PhaseProfile profile_;
  /// The families' amortised work's temporaries (the root solvers'), shared by all
  /// (one chunk is solved at a time) and kept across steps: not state, not saved.
  InverseRootWorkspace root_workspace_;
  /// The blocks' buffers of a chunk (a gathered gradient, Ĝ, P_g, 16-bit
  /// preconditioning's rounded Ĝ and L̄ Ĝ), shared by the gradient stacks and kept
  /// across steps: not state, not saved.
  kernels::Scratch block_scratch_;
  bool profile_memory_ = false;
  int64_t step_peak_bytes_ = -1;       ///< the last step's, when measured
  int64_t workspace_limit_bytes_ = 0;  ///< the last step's budget (0: none)

  // The AdamW segments' gradients and updates, packed one segment after another
  // (segment j starts at segment_offsets_[j]).
  at::Tensor adamw_grad_;
  at::Tensor adamw_update_;
  std::vector<int64_t> segment_offsets_;
  double overflow_limit_ = 0.0;
  int64_t factor_resets_reported_ = 0;  ///< how many of the families' resets a warning has announced
  /// The gradient check's buffers, kept across steps (not state, not saved): the
  /// per-tensor magnitudes (kernels::largest_magnitude_of_list), each failure
  /// record's worst run of failures (failure_excess_into), the decision
  /// [largest magnitude, root failures past their limit, factor resets] on the
  /// parameters' device, and its host copy.
  at::Tensor magnitudes_;
  at::Tensor failure_worst_;
  at::Tensor decision_;
  at::Tensor decision_on_host_;
  std::vector<std::string> layouts_;          ///< state_layout() of each group at construction
  std::unique_ptr<Distributor> distributor_;  ///< who computes which blocks; applies the updates
};

}  // namespace dash::optim
