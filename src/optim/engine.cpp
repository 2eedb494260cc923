#include "optim/engine.h"

#include "distributed/update_exchange.h"
#include "distributed/work_split.h"
#include "optim/dash_options.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

namespace dash::optim {
namespace {

const DashOptions& options_of(const torch::optim::OptimizerParamGroup& group) {
  return static_cast<const DashOptions&>(group.options());
}

bool uses_graft_statistic(GraftingType grafting) {
  return grafting == GraftingType::Adam || grafting == GraftingType::RMSprop || grafting == GraftingType::AdaGrad;
}

// Zero moments of shape (n, rows, cols); t is kept per block ((n, 1, 1)) or, for
// AdamW segments, per element.
MomentState zero_moments(const std::vector<int64_t>& shape, bool steps_per_block, const StepHyper& hyper,
    const at::TensorOptions& to) {
  MomentState state;
  state.grad_ema = at::zeros(shape, to);
  if (uses_graft_statistic(hyper.grafting)) state.graft_stat = at::zeros(shape, to);
  if (hyper.momentum > 0.0) state.momentum = at::zeros(shape, to);
  state.steps = steps_per_block ? at::zeros({shape[0], 1, 1}, to) : at::zeros(shape, to);
  return state;
}

MomentState take(const MomentState& full, const Rows& rows) {
  auto part = [&](const at::Tensor& t) { return t.defined() ? rows.take(t) : t; };
  return {part(full.grad_ema), part(full.graft_stat), part(full.momentum), part(full.steps)};
}

void put(MomentState& full, const MomentState& part, const Rows& rows) {
  auto back = [&](at::Tensor& t, const at::Tensor& p) {
    if (t.defined()) rows.put(t, p);
  };
  back(full.grad_ema, part.grad_ema);
  back(full.graft_stat, part.graft_stat);
  back(full.momentum, part.momentum);
  back(full.steps, part.steps);
}

bool root_due(int64_t step, const DashOptions& options) {
  return step >= options.start_step() && (step - options.start_step()) % options.root_frequency() == 0;
}

at::Tensor bool_mask(const std::vector<bool>& values, const at::Device& device) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return at::tensor(bytes, at::kByte).to(device).to(at::kBool);
}

}  // namespace

Rows Rows::all(int64_t count) {
  Rows rows;
  rows.everything_ = true;
  for (int64_t b = 0; b < count; ++b) rows.blocks_.push_back(b);
  return rows;
}

Rows Rows::range(int64_t start, int64_t length) {
  Rows rows;
  for (int64_t b = start; b < start + length; ++b) rows.blocks_.push_back(b);
  return rows;
}

Rows Rows::subset(std::vector<int64_t> blocks, const at::Device& device) {
  Rows rows;
  rows.indices_ = at::tensor(blocks, at::kLong).to(device);
  rows.blocks_ = std::move(blocks);
  return rows;
}

at::Tensor Rows::take(const at::Tensor& full) const {
  if (indices_.defined()) return full.index_select(0, indices_);
  if (everything_) return full;
  return full.narrow(0, blocks_.front(), static_cast<int64_t>(blocks_.size()));
}

void Rows::put(at::Tensor& full, const at::Tensor& part) const {
  if (indices_.defined()) full.index_copy_(0, indices_, part);
}

// What one step works with, decided on the host before any tensor work.
struct Engine::StepContext {
  const std::vector<torch::optim::OptimizerParamGroup>* groups = nullptr;
  std::vector<bool> has_grad;                  // per parameter
  std::vector<std::vector<int64_t>> active;    // per gradient stack: blocks with a gradient
  std::vector<bool> stack_complete;            // every block of the stack has one

  const DashOptions& options(int64_t group) const { return options_of((*groups)[group]); }
};

Engine::Engine(const std::vector<torch::optim::OptimizerParamGroup>& groups,
    std::shared_ptr<const DistributedContext> distributed_context)
    : distributed(std::move(distributed_context)) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> group_of;
  std::vector<blocking::GroupBlocking> blocking;
  for (size_t g = 0; g < groups.size(); ++g) {
    blocking.push_back(group_blocking(options_of(groups[g])));
    for (const auto& param : groups[g].params()) {
      TORCH_CHECK(param.is_floating_point(), "dash::Dash: parameters must be floating point, got ",
          param.scalar_type());
      TORCH_CHECK(params.empty() || param.device() == params.front().device(),
          "dash::Dash: all parameters must be on one device, got ", params.front().device(), " and ",
          param.device());
      params.push_back(param);
      shapes.push_back(param.sizes().vec());
      group_of.push_back(static_cast<int64_t>(g));
    }
  }
  plan = blocking::plan_stacks(shapes, group_of, blocking);
  if (params.empty()) return;
  const auto to = at::TensorOptions().dtype(at::kFloat).device(params.front().device());
  const bool sharded = distributed && distributed->world_size() > 1;
  if (sharded) {
    const auto split = distributed::split_work(plan, distributed->world_size());
    std::vector<std::vector<int64_t>> positions;
    for (int64_t rank = 0; rank < distributed->world_size(); ++rank) {
      positions.push_back(distributed::owned_positions(plan, split, rank));
    }
    exchange_ = std::make_unique<distributed::UpdateExchange>(*distributed, positions, plan.flat_numel, to.device());
    plan = distributed::plan_for_rank(plan, split, distributed->rank(), blocking);
  }
  for (const auto& stack : plan.gradient_stacks) {
    const auto& options = options_of(groups[stack.group]);
    GradientStackState state;
    state.gather_index = at::tensor(stack.flat_index, at::kLong).to(to.device());
    state.moments = zero_moments({stack.count(), stack.rows, stack.cols}, true, step_hyper(options), to);
    state.steps.assign(stack.count(), 0);
    state.grad = at::empty({stack.count(), stack.rows, stack.cols}, to);
    state.ghat = at::empty_like(state.grad);
    state.graft = at::empty_like(state.grad);
    stacks.push_back(std::move(state));
  }
  for (const auto& stack : plan.factor_stacks) {
    auto identity = at::eye(stack.size, to).expand({stack.count, stack.size, stack.size});
    factors.push_back({at::zeros({stack.count, stack.size, stack.size}, to), identity.contiguous(),
        at::zeros({}, to.dtype(at::kLong))});
  }
  for (const auto& segment : plan.adamw_segments) {
    auto moments = zero_moments({1, 1, segment.numel}, false, adamw_hyper(options_of(groups[segment.group])), to);
    Workspace work{at::empty_like(moments.grad_ema), at::empty_like(moments.grad_ema), at::Tensor(), at::Tensor()};
    segments.push_back({std::move(moments), std::move(work)});
  }
  flat_grad_ = at::empty({plan.flat_numel}, to);
  flat_update_ = at::empty({plan.flat_numel + (sharded ? 1 : 0)}, to);
}

Engine::~Engine() = default;

int64_t Engine::communicated_bytes_per_step() const { return exchange_ ? exchange_->bytes_per_step() : 0; }

bool Engine::matches(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  size_t index = 0;
  for (const auto& group : groups) {
    for (const auto& param : group.params()) {
      if (index >= params.size() || !param.is_same(params[index])) return false;
      ++index;
    }
  }
  return index == params.size();
}

// Concatenates all gradients into the flat buffer (one cat) and checks them for
// NaN/Inf with one scalar read-back. Returns false when the step is to be skipped.
bool Engine::gather_gradients(StepContext& context) {
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
      [&](size_t a, size_t b) { return plan.parameters[a].offset < plan.parameters[b].offset; });
  std::vector<at::Tensor> pieces;
  context.has_grad.assign(params.size(), false);
  for (auto i : order) {
    const auto& grad = params[i].grad();
    if (plan.parameters[i].numel == 0) continue;
    if (grad.defined()) {
      TORCH_CHECK(!grad.is_sparse(), "dash::Dash: sparse gradients are not supported (parameter ", i,
          " of shape ", params[i].sizes(), ")");
      context.has_grad[i] = true;
      auto flat = grad.reshape(-1);
      pieces.push_back(flat.scalar_type() == at::kFloat ? flat : flat.to(at::kFloat));
    } else {
      pieces.push_back(at::zeros({plan.parameters[i].numel}, flat_grad_.options()));
    }
  }
  if (pieces.empty()) return false;
  at::cat_out(flat_grad_, pieces);
  if (flat_grad_.isfinite().all().item<bool>()) return true;
  std::string culprit;
  for (size_t i = 0; i < params.size() && culprit.empty(); ++i) {
    if (context.has_grad[i] && !params[i].grad().isfinite().all().item<bool>()) {
      culprit = "parameter " + std::to_string(i) + " of shape " + c10::str(params[i].sizes());
    }
  }
  const auto policy = context.options(plan.parameters.front().group).non_finite_gradients();
  TORCH_CHECK(policy == NonFiniteGradients::SkipStep, "dash::Dash: non-finite gradient (NaN or Inf) in ", culprit,
      "; set DashOptions::non_finite_gradients(NonFiniteGradients::SkipStep) to skip such steps");
  TORCH_WARN("dash::Dash: skipping a step: non-finite gradient in ", culprit);
  ++skipped_steps;
  return false;
}

// The gradient blocks of `rows`: for a whole stack, the persistent buffer that
// step() filled; otherwise gathered now.
at::Tensor Engine::gradient_blocks(size_t s, const Rows& rows) {
  const auto& stack = plan.gradient_stacks[s];
  if (rows.everything()) return stacks[s].grad;
  ScopedPhase phase(profile, Phase::Copies);
  auto elements = rows.take(stacks[s].gather_index.view({stack.count(), -1})).reshape(-1);
  return flat_grad_.index_select(0, elements).view({-1, stack.rows, stack.cols});
}

void Engine::update_factors(StepContext& context, size_t s, const Rows& rows) {
  const auto& stack = plan.gradient_stacks[s];
  const double beta = context.options(stack.group).beta_factor();
  auto grad = gradient_blocks(s, rows);
  ScopedPhase phase(profile, Phase::Factors);
  auto side = [&](int64_t factor_stack, int64_t offset, bool left) {
    auto segment = factors[factor_stack].factors.narrow(0, offset, stack.count());
    auto part = rows.take(segment);
    accumulate_factor(part, grad, left, beta);
    rows.put(segment, part);
  };
  side(stack.left_stack, stack.left_offset, true);
  if (!stack.one_sided) side(stack.right_stack, stack.right_offset, false);
}

// Inverse roots of the factors that are due (spec §4 step 4). A root that comes
// out non-finite, or a solver that throws, keeps the previous root and counts a
// failure; no host sync.
void Engine::refresh_roots(StepContext& context, size_t k) {
  const auto& stack = plan.factor_stacks[k];
  const auto& options = context.options(stack.group);
  std::vector<bool> due(stack.count, false);
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
    const auto& gradient_stack = plan.gradient_stacks[s];
    for (int64_t block : context.active[s]) {
      bool is_due = root_due(stacks[s].steps[block], options);
      if (gradient_stack.left_stack == static_cast<int64_t>(k)) due[gradient_stack.left_offset + block] = is_due;
      if (gradient_stack.right_stack == static_cast<int64_t>(k)) due[gradient_stack.right_offset + block] = is_due;
    }
  }
  const auto due_count = std::count(due.begin(), due.end(), true);
  if (due_count == 0) return;
  auto& state = factors[k];
  ScopedPhase phase(profile, Phase::Roots);
  auto refresh = [&](const Rows& rows, const at::Tensor& due_mask) {
    auto part_factors = rows.take(state.factors);
    auto part_roots = rows.take(state.roots);
    at::Tensor fresh;
    try {
      fresh = inverse_root(part_factors, stack.root, options.root());
    } catch (const c10::Error& error) {
      TORCH_WARN("dash::Dash: inverse root of a ", stack.size, "×", stack.size,
          " factor stack failed; keeping the previous roots: ", error.what_without_backtrace());
      state.failures.add_(due_mask.defined() ? due_mask.sum() : at::full({}, part_factors.size(0), at::kLong));
      return;
    }
    auto ok = at::isfinite(fresh).all(-1).all(-1);
    if (due_mask.defined()) ok = ok & due_mask;
    auto failed = due_mask.defined() ? (due_mask & ~ok) : ~ok;
    state.failures.add_(failed.sum());
    at::where_out(part_roots, ok.view({-1, 1, 1}), fresh, part_roots);
  };
  if (options.execution() == Execution::Sequential) {
    for (int64_t i = 0; i < stack.count; ++i) {
      if (due[i]) refresh(Rows::range(i, 1), at::Tensor());
    }
  } else {
    refresh(Rows::all(stack.count), due_count == stack.count ? at::Tensor() : bool_mask(due, state.factors.device()));
  }
}

// Steps 5–8 of spec §4 for the chosen blocks; writes lr · P into the flat update.
void Engine::write_direction(StepContext& context, size_t s, const Rows& rows) {
  const auto& stack = plan.gradient_stacks[s];
  const auto& options = context.options(stack.group);
  auto& state = stacks[s];
  auto grad = rows.everything() ? state.grad : gradient_blocks(s, rows);
  auto work = rows.everything() ? Workspace{state.ghat, state.graft, state.grad, state.ghat} : Workspace::like(grad);
  auto moments = take(state.moments, rows);
  const auto hyper = step_hyper(options);
  {
    ScopedPhase phase(profile, Phase::Grafting);
    grafting_direction(grad, moments, hyper, work);
  }

  // Which of these blocks are past t_start (decided on the host copy of t).
  std::vector<bool> started;
  for (auto b : rows.blocks()) started.push_back(state.steps[b] >= options.start_step());
  const auto started_count = std::count(started.begin(), started.end(), true);

  ScopedPhase phase(profile, Phase::Preconditioning);
  at::Tensor direction = work.graft;
  if (started_count > 0) {
    auto root_part = [&](int64_t factor_stack, int64_t offset) {
      return factor_stack < 0 ? at::Tensor()
                              : rows.take(factors[factor_stack].roots.narrow(0, offset, stack.count()));
    };
    auto preconditioned = preconditioned_direction(work, root_part(stack.left_stack, stack.left_offset),
        root_part(stack.right_stack, stack.right_offset), options.grafting());
    direction = started_count == static_cast<int64_t>(started.size())
        ? preconditioned
        : at::where(bool_mask(started, grad.device()).view({-1, 1, 1}), preconditioned, work.graft);
  }
  direction = apply_momentum(direction, moments, hyper);
  put(state.moments, moments, rows);
  ScopedPhase copies(profile, Phase::Copies);
  auto elements = rows.take(state.gather_index.view({stack.count(), -1})).reshape(-1);
  flat_update_.index_copy_(0, elements, direction.mul_(options.lr()).reshape(-1));
}

void Engine::update_adamw_segment(StepContext& context, size_t j) {
  const auto& segment = plan.adamw_segments[j];
  const auto& options = context.options(segment.group);
  auto& moments = segments[j].moments;
  ScopedPhase phase(profile, Phase::Grafting);
  auto grad = flat_grad_.narrow(0, segment.offset, segment.numel).view({1, 1, -1});
  bool all_active = true;
  for (auto i : segment.params) all_active = all_active && context.has_grad[i];
  // Parameters without a gradient keep their moments and t: the update runs on a
  // copy and only the active elements are kept.
  MomentState before;
  at::Tensor active;
  if (!all_active) {
    active = at::zeros({1, 1, segment.numel}, grad.options().dtype(at::kBool));
    for (auto i : segment.params) {
      if (context.has_grad[i]) {
        const auto& slot = plan.parameters[i];
        active.narrow(2, slot.offset - segment.offset, slot.numel).fill_(true);
      }
    }
    before = {moments.grad_ema.clone(), moments.graft_stat.clone(), at::Tensor(), moments.steps.clone()};
    moments.steps.add_(active);
  } else {
    moments.steps.add_(1);
  }
  auto& work = segments[j].work;
  grafting_direction(grad, moments, adamw_hyper(options), work);
  auto& direction = work.graft;
  if (!all_active) {
    moments.grad_ema.copy_(at::where(active, moments.grad_ema, before.grad_ema));
    moments.graft_stat.copy_(at::where(active, moments.graft_stat, before.graft_stat));
  }
  flat_update_.narrow(0, segment.offset, segment.numel).copy_(direction.view(-1) * options.lr());
}

// W ← W (1 − lr·wd) − lr·P for every parameter that had a gradient (spec §4
// steps 1 and 9), as one foreach call per group plus one for all updates.
void Engine::apply_updates(StepContext& context) {
  std::vector<std::vector<at::Tensor>> decayed(context.groups->size());
  std::vector<at::Tensor> targets;
  std::vector<at::Tensor> updates;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& slot = plan.parameters[i];
    if (!context.has_grad[i] || slot.numel == 0) continue;
    const auto& options = context.options(slot.group);
    if (options.weight_decay() > 0.0 &&
        (slot.view.kind == blocking::ParameterKind::Matrix || options.decay_one_dimensional())) {
      decayed[slot.group].push_back(params[i]);
    }
    targets.push_back(params[i]);
    auto update = flat_update_.narrow(0, slot.offset, slot.numel).view(params[i].sizes());
    updates.push_back(params[i].scalar_type() == at::kFloat ? update : update.to(params[i].scalar_type()));
  }
  for (size_t g = 0; g < decayed.size(); ++g) {
    if (decayed[g].empty()) continue;
    const auto& options = context.options(static_cast<int64_t>(g));
    at::_foreach_mul_(decayed[g], 1.0 - options.lr() * options.weight_decay());
  }
  if (!targets.empty()) at::_foreach_add_(targets, updates, -1.0);
}

void Engine::step(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  StepContext context;
  context.groups = &groups;
  if (params.empty()) return;
  {
    ScopedPhase phase(profile, Phase::Copies);
    if (!gather_gradients(context)) return;
  }
  ++steps_taken;

  // Host bookkeeping: active blocks and their t.
  context.active.resize(stacks.size());
  for (size_t s = 0; s < stacks.size(); ++s) {
    const auto& stack = plan.gradient_stacks[s];
    std::vector<bool> mask(stack.count(), false);
    for (int64_t b = 0; b < stack.count(); ++b) {
      if (context.has_grad[stack.block_params[b]]) {
        context.active[s].push_back(b);
        mask[b] = true;
        ++stacks[s].steps[b];
      }
    }
    const bool complete = static_cast<int64_t>(context.active[s].size()) == stack.count();
    context.stack_complete.push_back(complete);
    if (complete) {
      stacks[s].moments.steps.add_(1);
    } else if (!context.active[s].empty()) {
      stacks[s].moments.steps.add_(bool_mask(mask, flat_grad_.device()).view({-1, 1, 1}));
    }
  }
  {
    ScopedPhase phase(profile, Phase::Copies);
    for (size_t s = 0; s < stacks.size(); ++s) {
      if (context.stack_complete[s] &&
          context.options(plan.gradient_stacks[s].group).execution() == Execution::Batched) {
        auto flat_blocks = stacks[s].grad.view(-1);
        at::index_select_out(flat_blocks, flat_grad_, 0, stacks[s].gather_index);
      }
    }
  }
  // The rows each phase works on, built once per step (a subset's index goes to the
  // device once, not once per phase).
  std::vector<std::vector<Rows>> rows_of(stacks.size());
  for (size_t s = 0; s < stacks.size(); ++s) {
    if (context.active[s].empty()) continue;
    if (context.options(plan.gradient_stacks[s].group).execution() == Execution::Sequential) {
      for (auto b : context.active[s]) rows_of[s].push_back(Rows::range(b, 1));
    } else if (context.stack_complete[s]) {
      rows_of[s].push_back(Rows::all(plan.gradient_stacks[s].count()));
    } else {
      rows_of[s].push_back(Rows::subset(context.active[s], flat_grad_.device()));
    }
  }
  auto for_each_active = [&](auto&& work) {
    for (size_t s = 0; s < stacks.size(); ++s) {
      for (const auto& rows : rows_of[s]) work(s, rows);
    }
  };
  for_each_active([&](size_t s, const Rows& rows) { update_factors(context, s, rows); });
  for (size_t k = 0; k < factors.size(); ++k) refresh_roots(context, k);
  for_each_active([&](size_t s, const Rows& rows) { write_direction(context, s, rows); });
  for (size_t j = 0; j < segments.size(); ++j) update_adamw_segment(context, j);
  if (exchange_) {
    ScopedPhase phase(profile, Phase::Communication);
    exchange_->exchange(flat_update_);
  }
  ScopedPhase phase(profile, Phase::Copies);
  apply_updates(context);
}

}  // namespace dash::optim
