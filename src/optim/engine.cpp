#include "optim/engine.h"

#include "common/memory_peak.h"
#include "linalg/batched_matmul.h"
#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/block_update.h"
#include "optim/families/registry.h"
#include "optim/gradient_chunk_bytes.h"
#include "optim/moments.h"
#include "optim/parameter_checks.h"
#include "optim/state_fields.h"
#include "optim/state_precision.h"
#include "optim/step_context.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace dash::optim {
namespace {

// G Gᵀ of an r × c block has entries up to c·max|g|² and eigenvalues up to
// r·c·max|g|², which the root solvers' spectral scale computes. Keeping
// max(r, c)²·max|g|² ≤ FLT_MAX/16 holds both below the float32 range with room
// for the solvers' products (an AdamW-only plan: g² ≤ FLT_MAX/16).
double overflow_limit_for(const blocking::StackPlan& plan) {
  int64_t side = 1;
  for (const auto& stack : plan.gradient_stacks) side = std::max({side, stack.rows, stack.cols});
  return std::sqrt(static_cast<double>(std::numeric_limits<float>::max()) / 16.0) / static_cast<double>(side);
}

}  // namespace

Engine::Engine(const std::vector<torch::optim::OptimizerParamGroup>& groups,
    std::shared_ptr<const DistributedContext> distributed_context)
    : distributed_(std::move(distributed_context)) {
  // The state outlives this call: built under torch.inference_mode(), it would be
  // inference tensors that no later step may update. (The guard turns grad mode on.)
  const c10::InferenceMode state_is_not_inference(false);
  const at::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> group_of;
  std::vector<blocking::GroupBlocking> blocking;
  check_parameters(groups);
  for (size_t g = 0; g < groups.size(); ++g) {
    blocking.push_back(group_blocking(options_of(groups[g])));
    layouts_.push_back(state_layout(options_of(groups[g])));
    for (const auto& param : groups[g].params()) {
      params_.push_back(param);
      shapes.push_back(param.sizes().vec());
      group_of.push_back(static_cast<int64_t>(g));
    }
  }
  plan_ = blocking::plan_stacks(shapes, group_of, blocking);
  whole_plan_ = plan_;
  blocking_ = blocking;
  param_shapes_ = std::move(shapes);
  overflow_limit_ = overflow_limit_for(plan_);  // from all blocks, so that every rank decides alike
  if (params_.empty()) return;
  const auto to = at::TensorOptions().dtype(at::kFloat).device(params_.front().device());
  const bool float32_parameters = std::all_of(params_.begin(), params_.end(), [](const at::Tensor& param) {
    return param.scalar_type() == at::kFloat || param.scalar_type() == at::kBFloat16;
  });
  distributor_ = make_distributor(distributed_.get(), plan_, blocking, to, float32_parameters);
  block_numbers_ = own_block_numbers();
  decide_parameter_use();
  allocate_state(groups, to);
}

// Which parameters' gradients this process reads: all of a parameter's blocks (or
// its AdamW segment), some of its blocks (a rank of several), or none.
void Engine::decide_parameter_use() {
  const auto blocks_here = blocking::blocks_per_parameter(plan_);
  const auto blocks_anywhere = blocking::blocks_per_parameter(whole_plan_);
  param_use_.assign(params_.size(), ParamUse::None);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (blocks_here[i] > 0) param_use_[i] = blocks_here[i] == blocks_anywhere[i] ? ParamUse::Whole : ParamUse::Part;
  }
  for (const auto& segment : plan_.adamw_segments) {
    for (auto i : segment.params) param_use_[i] = ParamUse::Whole;
  }
}

// Zero state for this process's stacks and segments, and the groups' families with
// theirs (one family object for all the groups that name it).
void Engine::allocate_state(const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to) {
  for (const auto& stack : plan_.gradient_stacks) {
    const auto& options = options_of(groups[stack.group]);
    GradientStackState state;
    state.moments = zero_moments({stack.count(), stack.rows, stack.cols}, true, step_hyper(options), to,
        storage_dtype(FieldStorage::MomentPrecision, options));
    stacks_.push_back(std::move(state));
    host_steps_.emplace_back(stack.count(), 0);
  }
  std::vector<PreconditionerType> types;
  for (const auto& group : groups) {
    const auto type = options_of(group).preconditioner();
    const auto found = std::find(types.begin(), types.end(), type);
    family_of_group_.push_back(static_cast<size_t>(found - types.begin()));
    if (found == types.end()) {
      types.push_back(type);
      families_.push_back(make_preconditioner(type, plan_, groups, to));
    }
  }
  int64_t adamw_numel = 0;
  for (const auto& segment : plan_.adamw_segments) {
    segments_.push_back(zero_adamw_segment(segment, options_of(groups[segment.group]), to));
    segment_offsets_.push_back(adamw_numel);
    adamw_numel += segment.numel;
  }
  adamw_grad_ = at::zeros({adamw_numel}, to);
  adamw_update_ = at::empty({adamw_numel}, to);
}

Engine::~Engine() = default;

int64_t Engine::communicated_bytes_per_step() const {
  return distributor_ ? distributor_->communicated_bytes_per_step() : 0;
}

std::optional<size_t> Engine::changed_layout_group(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  for (size_t g = 0; g < groups.size() && g < layouts_.size(); ++g) {
    if (state_layout(options_of(groups[g])) != layouts_[g]) return g;
  }
  return std::nullopt;
}

void Engine::check_layout(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  const auto g = changed_layout_group(groups);
  TORCH_CHECK(!g, "dash::Dash: parameter group ", g.value_or(0),
      " changed options that decide the shape of its state after the state was created (was: ", layouts_[g.value_or(0)],
      "; now: ", state_layout(options_of(groups[g.value_or(0)])),
      "); set them before the first step, or build a new optimizer");
}

bool Engine::layout_matches(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  return !changed_layout_group(groups);
}

bool Engine::matches(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  size_t index = 0;
  for (const auto& group : groups) {
    for (const auto& param : group.params()) {
      if (index >= params_.size() || !param.is_same(params_[index])) return false;
      ++index;
    }
  }
  return index == params_.size();
}

Preconditioner& Engine::family_of(size_t s) const {
  return *families_[family_of_group_[plan_.gradient_stacks[s].group]];
}

int64_t Engine::resets_so_far() const {
  int64_t resets = 0;
  for (const auto& family : families_) {
    if (family->resets_total().defined()) resets += family->resets_total().item<int64_t>();
  }
  return resets;
}

FamilyBuffers Engine::family_buffers(const StepContext& context) {
  return {block_scratch_, subset_scratch(context), root_workspace_, profile_};
}

void Engine::update_statistics(StepContext& context, size_t s, const Rows& rows) {
  if (!family_of(s).keeps_statistics()) return;
  auto grad = gradient_blocks(context, s, rows);
  ScopedPhase phase(profile_, Phase::Factors);
  auto buffers = family_buffers(context);
  family_of(s).update_statistics(context, s, rows, grad, buffers);
}

// Where a scattered chunk's copies of its blocks go (Rows::take): without a workspace
// limit into the block scratch, which keeps them for the next such step, so that
// the step allocates nothing; within a limit they are temporaries, as the limit's
// chunks count them: buffers kept for chunks of two kinds (subsets and ranges)
// would together take more than the blocks' share of the limit.
kernels::Scratch* Engine::subset_scratch(const StepContext& context) {
  return context.budget.bounded() ? nullptr : &block_scratch_;
}

// A chunk's buffers, from block_scratch_ (kept across steps). The gradient is dead
// once Ĝ and P_g are formed: L̄ Ĝ goes into its buffer, and L̄ Ĝ R̄ into Ĝ's.
Workspace Engine::chunk_workspace(const at::Tensor& grad, MatmulPrecision precision) {
  Workspace work{block_scratch_.empty_like(grad), block_scratch_.empty_like(grad), grad, at::Tensor()};
  work.direction = work.ghat;
  work.graft_norms = block_scratch_.empty({grad.size(0), 1, 1}, grad.options());
  work.direction_norms = block_scratch_.empty({grad.size(0), 1, 1}, grad.options());
  if (precision != MatmulPrecision::FP32) {
    const auto operands = grad.options().dtype(linalg::operand_dtype(precision, grad.scalar_type()));
    work.ghat_operand = block_scratch_.empty(grad.sizes(), operands);
    work.product_operand = block_scratch_.empty(grad.sizes(), operands);
  }
  return work;
}

// Steps 5–8 of spec §4 for the chosen blocks; hands lr · P to the distributor.
void Engine::write_direction(StepContext& context, size_t s, const Rows& rows) {
  const auto& stack = plan_.gradient_stacks[s];
  const auto& options = context.options(stack.group);
  auto& state = stacks_[s];
  auto grad = gradient_blocks(context, s, rows);
  const auto precision = options.preconditioning_precision();
  auto work = chunk_workspace(grad, precision);
  const auto hyper = step_hyper(options);
  const auto stored = moments_of(state.moments, rows, subset_scratch(context));
  auto moments = widened_moments(stored, block_scratch_);
  moments.grad_correction = rows.take(state.grad_correction, subset_scratch(context));
  moments.stat_correction = rows.take(state.stat_correction, subset_scratch(context));
  {
    ScopedPhase phase(profile_, Phase::Grafting);
    grafting_direction(grad, moments, hyper, work);
  }

  // Which of these blocks are past t_start (decided on the host copy of t), as
  // positions in `rows`; those before it take the grafting direction.
  std::vector<int64_t> waiting;
  for (size_t i = 0; i < rows.blocks().size(); ++i) {
    if (host_steps_[s][rows.blocks()[i]] < options.start_step()) waiting.push_back(static_cast<int64_t>(i));
  }
  const auto started_count = static_cast<int64_t>(rows.blocks().size() - waiting.size());

  at::Tensor direction = work.graft;
  const bool all_started = waiting.empty();
  // Without momentum, lr scales P together with the grafting norm, saving a pass.
  const bool lr_in_direction = hyper.momentum == 0.0 && all_started;
  {
    ScopedPhase phase(profile_, Phase::Preconditioning);
    if (started_count > 0) {
      // Nesterov's form for the family (Muon's): the gradient is read here for the
      // last time; the family may then write into its buffer (work.product).
      if (options.nesterov_grad()) work.ghat.mul_(hyper.beta_grad).add_(grad, 1.0 - hyper.beta_grad);
      auto buffers = family_buffers(context);
      auto preconditioned = grafted(work, family_of(s).direction(context, s, rows, work, buffers), options.grafting(),
          lr_in_direction ? options.lr() : 1.0);
      // (U is in Ĝ's or L̄ Ĝ's buffer, never P_g's.)
      for (const auto& run : consecutive_runs(waiting)) {
        preconditioned.narrow(0, run.block, run.length).copy_(work.graft.narrow(0, run.block, run.length));
      }
      direction = preconditioned;
    }
    direction = apply_momentum(direction, moments, hyper);
    store_rounded_moments(stored, moments);
    put_moments(state.moments, stored, rows);
    if (!lr_in_direction) direction.mul_(options.lr());
  }
  distributor_->write_blocks(*context.write, s, rows.blocks(), direction, profile_);
}

void Engine::update_adamw_segment(StepContext& context, size_t j) {
  const auto& segment = plan_.adamw_segments[j];
  ScopedPhase phase(profile_, Phase::Grafting);
  step_adamw_segment(segment, plan_.parameters, context.has_grad, context.options(segment.group),
      adamw_grad_.narrow(0, segment_offsets_[j], segment.numel).view({1, 1, -1}), segments_[j],
      adamw_update_.narrow(0, segment_offsets_[j], segment.numel));
}

// The factor 1 − lr·wd of every decayed parameter that had a gradient (spec §4
// step 1), 1 for the others: the distributor applies it with the update.
std::vector<double> Engine::weight_decay_factors(const StepContext& context) const {
  std::vector<double> factors(params_.size(), 1.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& slot = plan_.parameters[i];
    if (!context.has_grad[i] || slot.numel == 0) continue;
    const auto& options = context.options(slot.group);
    if (options.weight_decay() > 0.0 &&
        (slot.view.kind == blocking::ParameterKind::Matrix || options.decay_one_dimensional())) {
      factors[i] = 1.0 - options.lr() * options.weight_decay();
    }
  }
  return factors;
}

// The chunks each phase works on, built once per step: per gradient stack, its
// blocks with a gradient in runs that fit the blocks' share of the workspace (one
// block each for Execution::Sequential).
std::vector<std::vector<Rows>> Engine::chunks_per_stack(const StepContext& context) {
  std::vector<std::vector<Rows>> chunks_of(stacks_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& active = context.active[s];
    if (active.empty()) continue;
    const auto& stack = plan_.gradient_stacks[s];
    const auto& options = context.options(stack.group);
    const auto bytes_per_block = gradient_chunk_bytes_per_block(stack, options, stacks_[s].moments,
        context.stack_complete[s], family_of(s).chunk_bytes_per_block(stack, options, context.stack_complete[s]));
    const int64_t size =
        options.execution() == Execution::Sequential
            ? 1
            : items_per_chunk(static_cast<int64_t>(active.size()), bytes_per_block, 0, context.budget.blocks());
    chunks_of[s] = chunk_rows(active, stack.count(), size, params_.front().device(), stacks_[s].active_indices);
  }
  return chunks_of;
}

// The groups' workspace_limit, resolved against the state as it is now.
WorkspaceBudget Engine::step_budget(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  const auto state = state_bytes();
  std::vector<WorkspaceBudget> budgets;
  for (const auto& group : groups) budgets.push_back(workspace_budget(options_of(group).workspace_limit(), state));
  return largest_budget(budgets);
}

void Engine::step(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<at::Tensor> gradients) {
  step_peak_bytes_ = -1;
  if (!profile_memory_) {
    run_step(groups, std::move(gradients));
    return;
  }
  const common::MeasureMemoryPeak measure;
  run_step(groups, std::move(gradients));
  step_peak_bytes_ = measure.peak_bytes();
}

// The state in the groups' factor_precision, root_precision and moment_precision:
// converted where an option changed since the last step.
void Engine::convert_state_precision(const StepContext& context) {
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& options = context.options(plan_.gradient_stacks[s].group);
    for (const auto& field : moment_fields) {
      convert_state(stacks_[s].moments.*field.tensor, storage_dtype(field.storage, options));
    }
  }
  for (auto& family : families_) family->convert_precision(context);
}

void Engine::run_step(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<at::Tensor> gradients) {
  StepContext context;
  context.groups = &groups;
  context.gradients = std::move(gradients);
  context.steps = &host_steps_;
  if (params_.empty()) return;
  convert_state_precision(context);
  context.budget = step_budget(groups);
  // The scratches only grow: buffers made for no limit or a larger one go.
  if (context.budget.bounded() && (workspace_limit_bytes_ == 0 || context.budget.limit < workspace_limit_bytes_)) {
    block_scratch_ = kernels::Scratch();
    root_workspace_ = InverseRootWorkspace();
  }
  workspace_limit_bytes_ = context.budget.limit;
  // A rank's exchange rounds within as much as the blocks' buffers (on top of them,
  // as workspace_budget.h counts a rank's exchange).
  distributor_->bound_workspace(context.budget.blocks());
  context.keep_gradients = !context.budget.bounded();
  if (!context.keep_gradients) {
    for (auto& stack : stacks_) stack.gathered = at::Tensor();
  }
  {
    // The gather only fills scratch buffers, so a step skipped after it changed no
    // state (under Zero the gradients of this rank's blocks hold their averages then).
    ScopedPhase phase(profile_, Phase::Copies);
    if (!collect_gradients(context)) return;
    gather_gradients(context);
    if (!gradients_usable(context)) return;
  }
  ++steps_taken_;

  count_active_blocks(context);
  const auto chunks_of = chunks_per_stack(context);
  auto for_each_chunk = [&](auto&& work) {
    for (size_t s = 0; s < stacks_.size(); ++s) {
      for (const auto& rows : chunks_of[s]) work(s, rows);
    }
  };
  for_each_chunk([&](size_t s, const Rows& rows) { update_statistics(context, s, rows); });
  for (auto& family : families_) {
    auto buffers = family_buffers(context);
    family->refresh(context, buffers);
  }
  context.decay = weight_decay_factors(context);
  const StepWrite write{plan_, params_, context.has_grad, context.decay};
  context.write = &write;
  distributor_->begin_updates(write);
  for_each_chunk([&](size_t s, const Rows& rows) {
    write_direction(context, s, rows);
    // Within a limit (and one block at a time) the next chunk reuses this one's
    // buffers: its updates go now; else all stacks' go at the end, in one transfer.
    if (context.budget.bounded() || chunks_of[s].size() > 1) distributor_->flush_updates(profile_);
  });
  for (size_t j = 0; j < segments_.size(); ++j) update_adamw_segment(context, j);
  distributor_->finish_updates(write, adamw_update_, segment_offsets_, profile_);
  // A step that read no decision learns of factors reset at its root computation
  // once it is done (a read back on root steps only); the others at the next
  // step's decision.
  if (!context.decision_read && context.amortised_work_done) announce_factor_resets(resets_so_far());
}

}  // namespace dash::optim
