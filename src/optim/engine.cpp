#include "optim/engine.h"

#include "common/memory_peak.h"
#include "linalg/batched_matmul.h"
#include "linalg/matrix_transfer.h"
#include "linalg/stack_reductions.h"
#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/grafting.h"
#include "optim/host_masks.h"
#include "optim/state_precision.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

namespace dash::optim {
namespace {

// Zero moments of shape (n, rows, cols) in `dtype`; t is kept in float32, per block
// ((n, 1, 1)) or, for AdamW segments, per element.
MomentState zero_moments(const std::vector<int64_t>& shape, bool steps_per_block, const StepHyper& hyper,
    const at::TensorOptions& to, at::ScalarType dtype = at::kFloat) {
  MomentState state;
  const auto stored = to.dtype(dtype);
  state.grad_ema = at::zeros(shape, stored);
  if (grafting_for(hyper.grafting).keeps_statistic()) state.graft_stat = at::zeros(shape, stored);
  if (hyper.momentum > 0.0) state.momentum = at::zeros(shape, stored);
  state.steps = steps_per_block ? at::zeros({shape[0], 1, 1}, to) : at::zeros(shape, to);
  return state;
}

MomentState take(const MomentState& full, const Rows& rows) {
  auto part = [&](const at::Tensor& t) { return t.defined() ? rows.take(t) : t; };
  return {part(full.grad_ema), part(full.graft_stat), part(full.momentum), part(full.steps)};
}

// The moments as float32 for the step's arithmetic (state_precision.h).
MomentState widened_moments(const MomentState& stored, linalg::Scratch& scratch) {
  return {widened(stored.grad_ema, scratch), widened(stored.graft_stat, scratch), widened(stored.momentum, scratch),
      stored.steps};
}

void store_rounded_moments(const MomentState& stored, const MomentState& computed) {
  store_rounded(stored.grad_ema, computed.grad_ema);
  store_rounded(stored.graft_stat, computed.graft_stat);
  store_rounded(stored.momentum, computed.momentum);
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

// G Gᵀ of an r × c block has entries up to c·max|g|² and eigenvalues up to
// r·c·max|g|², which the root solvers' spectral scale computes. Keeping
// max(r, c)²·max|g|² ≤ FLT_MAX/16 holds both below the float32 range with room
// for the solvers' products (an AdamW-only plan: g² ≤ FLT_MAX/16).
double overflow_limit_for(const blocking::StackPlan& plan) {
  int64_t side = 1;
  for (const auto& stack : plan.gradient_stacks) side = std::max({side, stack.rows, stack.cols});
  return std::sqrt(static_cast<double>(std::numeric_limits<float>::max()) / 16.0) / static_cast<double>(side);
}

bool root_due(int64_t step, const DashOptions& options) {
  return step >= options.start_step() && (step - options.start_step()) % options.root_frequency() == 0;
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

Rows Rows::subset(std::vector<int64_t> blocks, at::Tensor indices) {
  TORCH_CHECK(indices.numel() == static_cast<int64_t>(blocks.size()), "dash: Rows::subset: ", indices.numel(),
      " indices for ", blocks.size(), " blocks");
  Rows rows;
  rows.indices_ = std::move(indices);
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
  WorkspaceBudget budget;                    // the groups' workspace_limit
  bool keep_gradients = true;                // no limit: every stack gathered once and kept
  std::vector<bool> has_grad;                // per parameter
  std::vector<std::vector<int64_t>> active;  // per gradient stack: blocks with a gradient
  std::vector<bool> stack_complete;          // every block of the stack has one
  std::vector<bool> mixed_start;             // its active blocks are not all past t_start, nor all before
  std::vector<double> decay;                 // per parameter: W's factor 1 − lr·wd
  // Per gradient stack: the bias corrections 1 − β_G^t, 1 − β_g^t of all its
  // blocks, made by its first chunk (MomentState::grad_correction).
  std::vector<std::pair<at::Tensor, at::Tensor>> corrections;
  const StepWrite* write = nullptr;  // where the directions go

  const DashOptions& options(int64_t group) const { return options_of((*groups)[group]); }
};

namespace {

// The bytes a parameter's elements span, from its first to one past its last.
struct MemorySpan {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  at::IntArrayRef shape;
};

// Two parameters in overlapping memory (overlapping or interleaved views of one
// storage) would be written by the update's write-back from several threads at once
// (linalg/matrix_transfer.h), and an optimizer that moves each parameter by its own
// update has no meaning for them anyway.
void check_disjoint_memory(std::vector<MemorySpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < spans.size(); ++k) {
    TORCH_CHECK(spans[k].begin >= spans[k - 1].end, "dash::Dash: parameters of shapes ", spans[k - 1].shape, " and ",
        spans[k].shape,
        " lie in overlapping memory (views of one storage that overlap or interleave); each "
        "parameter must have memory of its own");
  }
}

MemorySpan memory_span(const at::Tensor& param) {
  int64_t last = 0;
  for (int64_t d = 0; d < param.dim(); ++d) last += (param.size(d) - 1) * param.stride(d);
  const auto element = static_cast<uintptr_t>(param.element_size());
  const auto begin = reinterpret_cast<uintptr_t>(static_cast<const char*>(param.storage().data())) +
                     static_cast<uintptr_t>(param.storage_offset()) * element;
  return {begin, begin + (static_cast<uintptr_t>(last) + 1) * element, param.sizes()};
}

}  // namespace

void check_parameters(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::map<const c10::TensorImpl*, size_t> group_of_param;
  std::vector<MemorySpan> spans;
  const at::Tensor* first_param = nullptr;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& param : groups[g].params()) {
      const auto [seen, first] = group_of_param.emplace(param.unsafeGetTensorImpl(), g);
      TORCH_CHECK(first, "dash::Dash: a parameter of shape ", param.sizes(), " appears twice (in parameter groups ",
          seen->second, " and ", g, "); each tensor may be optimised once");
      TORCH_CHECK(
          param.is_floating_point(), "dash::Dash: parameters must be floating point, got ", param.scalar_type());
      // A model built on the meta device has shapes but no memory yet: the state would
      // be meta tensors too, and the first step would fail far from the cause.
      TORCH_CHECK(!param.is_meta(), "dash::Dash: a parameter of shape ", param.sizes(),
          " is on the meta device (no data); build the optimizer after the model is materialised (e.g. "
          "to_empty() and loading its weights)");
      // FSDP2's fully_shard and tensor parallelism make DTensors: subclasses whose data
      // lives in Python-side shards that no C++ view can address.
      TORCH_CHECK(!param.unsafeGetTensorImpl()->is_python_dispatch(), "dash::Dash: a parameter of shape ",
          param.sizes(),
          " is a tensor subclass with its own dispatch (a DTensor of FSDP2's fully_shard or of tensor "
          "parallelism, say); dash's C++ takes plain tensors: the local shards of parameters that FSDP shards "
          "(Python's dash.Dash passes them, docs/python.md \"FSDP\"), or whole parameters");
      if (first_param == nullptr) first_param = &param;
      TORCH_CHECK(param.device() == first_param->device(), "dash::Dash: all parameters must be on one device, got ",
          first_param->device(), " and ", param.device());
      if (param.numel() > 0 && param.has_storage()) spans.push_back(memory_span(param));
    }
  }
  check_disjoint_memory(std::move(spans));
}

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
  factor_resets_total_ = at::zeros({}, to.dtype(at::kLong));
  const bool float32_parameters = std::all_of(params_.begin(), params_.end(), [](const at::Tensor& param) {
    return param.scalar_type() == at::kFloat || param.scalar_type() == at::kBFloat16;
  });
  distributor_ = make_distributor(distributed_.get(), plan_, blocking, to, float32_parameters);
  block_numbers_ = own_block_numbers();
  // Which parameters' gradients this process reads: all of a parameter's blocks (or
  // its AdamW segment), some of its blocks (a rank of several), or none.
  const auto blocks_here = blocking::blocks_per_parameter(plan_);
  const auto blocks_anywhere = blocking::blocks_per_parameter(whole_plan_);
  param_use_.assign(params_.size(), ParamUse::None);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (blocks_here[i] > 0) param_use_[i] = blocks_here[i] == blocks_anywhere[i] ? ParamUse::Whole : ParamUse::Part;
  }
  for (const auto& segment : plan_.adamw_segments) {
    for (auto i : segment.params) param_use_[i] = ParamUse::Whole;
  }
  for (const auto& stack : plan_.gradient_stacks) {
    const auto& options = options_of(groups[stack.group]);
    GradientStackState state;
    state.moments = zero_moments({stack.count(), stack.rows, stack.cols}, true, step_hyper(options), to,
        state_dtype(options.moment_precision()));
    state.steps.assign(stack.count(), 0);
    stacks_.push_back(std::move(state));
  }
  for (const auto& stack : plan_.factor_stacks) {
    const auto& options = options_of(groups[stack.group]);
    // (CPU eye has no bfloat16 kernel in LibTorch 1.13: float32's, converted.)
    auto identity = at::eye(stack.size, to).to(state_dtype(options.root_precision()));
    factors_.push_back(
        {at::zeros({stack.count, stack.size, stack.size}, to.dtype(state_dtype(options.factor_precision()))),
            identity.expand({stack.count, stack.size, stack.size}).contiguous(), at::zeros({}, to.dtype(at::kLong))});
  }
  int64_t adamw_numel = 0;
  for (const auto& segment : plan_.adamw_segments) {
    auto moments = zero_moments({1, 1, segment.numel}, false, adamw_hyper(options_of(groups[segment.group])), to);
    Workspace work{at::empty_like(moments.grad_ema), at::empty_like(moments.grad_ema), at::Tensor(), at::Tensor()};
    segments_.push_back({std::move(moments), std::move(work)});
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

// Which parameters have a gradient this step, as the distributor makes them; rejects
// gradients the step cannot use. Returns false when there is nothing to do: no
// parameter with an element has a gradient (such a step is not counted, as
// torch.optim's optimizers create no state; ranks decide that together).
bool Engine::collect_gradients(StepContext& context) {
  context.has_grad.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    TORCH_CHECK(params_[i].sizes() == at::IntArrayRef(param_shapes_[i]), "dash::Dash: parameter ", i, " has shape ",
        params_[i].sizes(), ", but had ", at::IntArrayRef(param_shapes_[i]),
        " when its blocks were planned; a parameter's shape cannot change (build a new optimizer)");
    const auto& grad = params_[i].grad();
    if (!grad.defined() || plan_.parameters[i].numel == 0) continue;
    TORCH_CHECK(!grad.is_sparse(), "dash::Dash: sparse gradients are not supported (parameter ", i, " of shape ",
        params_[i].sizes(), ")");
    TORCH_CHECK(grad.sizes() == params_[i].sizes(), "dash::Dash: the gradient of parameter ", i, " has shape ",
        grad.sizes(), ", the parameter ", params_[i].sizes());
    TORCH_CHECK(grad.scalar_type() == params_[i].scalar_type(), "dash::Dash: the gradient of parameter ", i, " is ",
        grad.scalar_type(), ", the parameter ", params_[i].scalar_type());
    context.has_grad[i] = true;
  }
  // Under Zero, their gradients are averaged over the ranks now.
  return distributor_->receive_gradients(params_, context.has_grad, profile_);
}

// The step's one read back to the host: the largest magnitude of the gradients
// this process uses (NaN when an entry is NaN: the reductions propagate it), one
// pass over them all and no mask (linalg::largest_magnitude_of_list), and whether
// a root failure limit is exceeded, both as every rank sees them (the distributor's
// maximum over the ranks, so that all decide alike); with them the count of
// factors reset so far, so that a reset is announced without a read of its own.
// With every gradient gathered, the gathered buffers are checked (each element
// this process uses is in a stack or a segment, as float32); within a workspace
// limit, which gathers the blocks chunk by chunk later, the gradients of the
// parameters whose blocks or segments this process computes.
// Returns false when the step is to be skipped: a non-finite gradient
// (non_finite_gradients) or one above overflow_limit() (always skipped: the
// float32 statistics would overflow and no later root could be computed).
bool Engine::gradients_usable(StepContext& context) {
  std::vector<at::Tensor> checked;
  if (!context.keep_gradients) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (context.has_grad[i] && param_use_[i] == ParamUse::Whole) checked.push_back(params_[i].grad());
    }
    // A parameter only some of whose blocks are this rank's: the rectangles of those
    // blocks' regions, as matrices whose rows are contiguous (one pass each, no copy;
    // under Zero the other blocks hold this rank's own, unaveraged gradients).
    for (const auto& stack : plan_.gradient_stacks) {
      for (const auto& region : stack.regions) {
        const auto i = static_cast<size_t>(region.param);
        if (!context.has_grad[i] || param_use_[i] != ParamUse::Part) continue;
        checked.push_back(blocking::as_matrix(params_[i].grad(), plan_.parameters[i].view)
                              .narrow(0, region.row, region.grid_rows * region.block_rows)
                              .narrow(1, region.col, region.grid_cols * region.block_cols));
      }
    }
  } else {
    for (const auto& stack : stacks_) checked.push_back(stack.gathered);
    checked.push_back(adamw_grad_);
  }
  // (No gradient elements at all: nothing to skip for; a zero stands in, on the
  // parameters' device like the rest of the decision.)
  const auto largest_magnitude = linalg::largest_magnitude_of_list(checked).to(adamw_grad_.device());
  auto exceeded = bounded_failures_exceeded(context);
  if (!exceeded.defined()) exceeded = at::zeros({}, largest_magnitude.options());
  const auto decided = distributor_->maximum_over_ranks(at::stack({largest_magnitude, exceeded}));
  const auto host = at::cat({decided, factor_resets_total_.to(at::kFloat).view({1})}).cpu();
  // Before anything of this step changes: the failures of earlier steps.
  if (host[1].item<double>() > 0.0) raise_bounded_failures(context);
  const double largest = host[0].item<double>();
  const auto resets = static_cast<int64_t>(host[2].item<double>());
  if (resets > factor_resets_reported_) {
    TORCH_WARN("dash::Dash: ", resets - factor_resets_reported_,
        " factor(s) had overflowed, or were about to (entries above FLT_MAX/(16 b)), and were restarted from zero "
        "at the last root computation; diagnostics().factor_stacks[k].factor_resets counts them");
    factor_resets_reported_ = resets;
  }
  if (largest <= overflow_limit_) return true;  // false for NaN

  // The parameter to name: the first non-finite one (the first in a group whose
  // policy is to raise, when the step raises), or (all finite) the first too large
  // one. Finiteness is judged in each gradient's own dtype (a float64 gradient
  // above FLT_MAX is finite; only its float32 copy in the stacks is infinite), size
  // in float32, as `largest` was.
  std::optional<size_t> non_finite;
  std::optional<size_t> raising;  // the first non-finite one whose group's policy is to raise
  std::optional<size_t> too_large;
  for (size_t i = 0; i < params_.size() && !raising; ++i) {
    if (!context.has_grad[i]) continue;
    const auto& grad = params_[i].grad();
    if (!at::isfinite(grad).all().item<bool>()) {
      if (!non_finite) non_finite = i;
      if (context.options(plan_.parameters[i].group).non_finite_gradients() == NonFiniteGradients::Error) raising = i;
    } else if (!too_large && !(grad.to(at::kFloat).abs() <= overflow_limit_).all().item<bool>()) {
      too_large = i;
    }
  }
  // Every rank decides from what all of them saw (on this path only, one more small
  // collective): whether some rank holds a non-finite gradient, and whether one of
  // them is in a group whose policy is to raise. A rank may see none of it (under
  // Zero the gradient can be another rank's alone).
  const auto seen =
      distributor_
          ->maximum_over_ranks(at::tensor({non_finite ? 1.0f : 0.0f, raising ? 1.0f : 0.0f}).to(adamw_grad_.device()))
          .cpu();
  const bool any_non_finite = seen[0].item<float>() > 0.0f;
  const bool any_raising = seen[1].item<float>() > 0.0f;
  const auto named = any_non_finite ? (any_raising ? raising : non_finite) : too_large;
  const auto where = named ? "parameter " + std::to_string(*named) + " of shape " + c10::str(params_[*named].sizes())
                           : std::string("another rank's gradients");
  if (!any_non_finite) {
    const double magnitude = std::isfinite(largest) || !too_large
                                 ? largest
                                 : params_[*too_large].grad().abs().max().to(at::kDouble).item<double>();
    TORCH_WARN("dash::Dash: skipping a step: a gradient entry of magnitude ", magnitude, " in ", where, " is above ",
        overflow_limit_,
        ", beyond which the float32 statistics of its blocks can overflow; "
        "the state is unchanged (diagnostics().overflow_skipped_steps counts such steps)");
    ++overflow_skipped_steps_;
    return false;
  }
  TORCH_CHECK(!any_raising, "dash::Dash: non-finite gradient (NaN or Inf) in ", where,
      "; set the option non_finite_gradients to \"skip-step\" (C++: NonFiniteGradients::SkipStep) to skip such "
      "steps");
  TORCH_WARN("dash::Dash: skipping a step: non-finite gradient in ", where);
  ++skipped_steps_;
  return false;
}

// Moves the AdamW parameters' gradients into their packed segments and, without a
// workspace limit, each gradient into its blocks' stacks, a strided view per
// region (a parameter that tiles into B × B blocks is one region): one transfer
// of all of them (linalg/matrix_transfer.h), no flat concatenation of all gradients.
void Engine::gather_gradients(const StepContext& context) {
  std::vector<linalg::ViewPair> regions;
  for (size_t s = 0; s < stacks_.size() && context.keep_gradients; ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    auto& gathered = stacks_[s].gathered;
    if (!gathered.defined()) gathered = at::empty({stack.count(), stack.rows, stack.cols}, adamw_grad_.options());
    for (const auto& region : stack.regions) {
      const auto i = static_cast<size_t>(region.param);
      auto blocks = blocking::region_in_stack(gathered, region);
      if (context.has_grad[i]) {
        regions.push_back({blocks,
            blocking::region_in_matrix(blocking::as_matrix(params_[i].grad(), plan_.parameters[i].view), region)});
      } else {
        blocks.zero_();  // what the finiteness check reads there must not be a skipped step's NaN
      }
    }
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    for (auto i : segment.params) {
      const auto& slot = plan_.parameters[i];
      auto part = adamw_grad_.narrow(0, segment_offsets_[j] + slot.offset - segment.offset, slot.numel);
      if (context.has_grad[i]) {
        regions.push_back({part, params_[i].grad().reshape(-1)});
      } else {
        part.zero_();
      }
    }
  }
  linalg::transfer_matrices(regions, linalg::Transfer::Copy);
  // maximize: the step descends along −G (negation is exact: G's statistics are
  // what they would be for −G, the updates flip).
  for (size_t s = 0; s < stacks_.size() && context.keep_gradients; ++s) {
    if (context.options(plan_.gradient_stacks[s].group).maximize()) stacks_[s].gathered.neg_();
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    if (context.options(segment.group).maximize()) adamw_grad_.narrow(0, segment_offsets_[j], segment.numel).neg_();
  }
}

// The gradient blocks of `rows`, (rows, block_rows, block_cols): from the stack's
// gathered buffer (the buffer itself, a slice, or for a scattered subset a copy),
// or within a workspace limit gathered from the parameters' gradients into a
// chunk buffer.
at::Tensor Engine::gradient_blocks(const StepContext& context, size_t s, const Rows& rows) {
  ScopedPhase phase(profile_, Phase::Copies);
  const auto& gathered = stacks_[s].gathered;
  if (gathered.defined()) return rows.take(gathered);
  const auto& stack = plan_.gradient_stacks[s];
  auto blocks =
      block_scratch_.empty({static_cast<int64_t>(rows.blocks().size()), stack.rows, stack.cols}, adamw_grad_.options());
  std::vector<at::Tensor> matrices(params_.size());  // a gradient's matrix view, once per parameter
  std::vector<linalg::ViewPair> pairs;
  for (const auto& piece : blocking::regions_of_blocks(stack.regions, rows.blocks())) {
    auto& matrix = matrices[piece.param];
    if (!matrix.defined())
      matrix = blocking::as_matrix(params_[piece.param].grad(), plan_.parameters[piece.param].view);
    pairs.push_back({blocking::region_in_stack(blocks, piece), blocking::region_in_matrix(matrix, piece)});
  }
  linalg::transfer_matrices(pairs, linalg::Transfer::Copy);
  return context.options(stack.group).maximize() ? blocks.neg_() : blocks;
}

void Engine::update_factors(StepContext& context, size_t s, const Rows& rows) {
  const auto& stack = plan_.gradient_stacks[s];
  const double beta = context.options(stack.group).beta_factor();
  auto grad = gradient_blocks(context, s, rows);
  ScopedPhase phase(profile_, Phase::Factors);
  auto side = [&](int64_t factor_stack, int64_t offset, bool left) {
    auto segment = factors_[factor_stack].factors.narrow(0, offset, stack.count());
    auto part = rows.take(segment);
    auto computed = widened(part, block_scratch_);
    accumulate_factor(computed, grad, left, beta);
    store_rounded(part, computed);
    rows.put(segment, part);
  };
  side(stack.left_stack, stack.left_offset, true);
  if (!stack.one_sided) side(stack.right_stack, stack.right_offset, false);
}

// Which factors of stack k are due this step (from the host copy of each block's t),
// and their new roots by the stack's root policy (root_refresh.h).
void Engine::refresh_roots(StepContext& context, size_t k) {
  const auto& stack = plan_.factor_stacks[k];
  const auto& options = context.options(stack.group);
  std::vector<bool> due(stack.count, false);
  for (size_t s = 0; s < plan_.gradient_stacks.size(); ++s) {
    const auto& gradient_stack = plan_.gradient_stacks[s];
    for (int64_t block : context.active[s]) {
      bool is_due = root_due(stacks_[s].steps[block], options);
      if (gradient_stack.left_stack == static_cast<int64_t>(k)) due[gradient_stack.left_offset + block] = is_due;
      if (gradient_stack.right_stack == static_cast<int64_t>(k)) due[gradient_stack.right_offset + block] = is_due;
    }
  }
  if (std::none_of(due.begin(), due.end(), [](bool is_due) { return is_due; })) return;
  factors_[k].root_operands_current = false;
  ScopedPhase phase(profile_, Phase::Roots);
  RootBuffers buffers{root_workspace_, block_scratch_, factor_resets_total_};
  optim::refresh_roots(stack, options, context.budget, due, factors_[k], buffers);
}

// Distributed Shampoo's bounded-failure policy (max_consecutive_root_failures):
// whether some factor has failed that many root computations in a row, as a ()
// float tensor for the step's one read back; undefined when no group asks.
at::Tensor Engine::bounded_failures_exceeded(const StepContext& context) const {
  std::vector<at::Tensor> exceeded;
  for (size_t k = 0; k < factors_.size(); ++k) {
    const auto limit = context.options(plan_.factor_stacks[k].group).max_consecutive_root_failures();
    if (limit > 0 && factors_[k].consecutive_failures.defined()) {
      exceeded.push_back((factors_[k].consecutive_failures.max() >= limit).to(at::kFloat));
    }
  }
  return exceeded.empty() ? at::Tensor() : at::stack(exceeded).max();
}

// Raises, naming the first stack over its limit (host reads: this is the error path).
void Engine::raise_bounded_failures(const StepContext& context) const {
  for (size_t k = 0; k < factors_.size(); ++k) {
    const auto& stack = plan_.factor_stacks[k];
    const auto limit = context.options(stack.group).max_consecutive_root_failures();
    if (limit == 0 || !factors_[k].consecutive_failures.defined()) continue;
    const auto worst = factors_[k].consecutive_failures.max().item<int64_t>();
    TORCH_CHECK(worst < limit, "dash::Dash: an inverse root in factor stack ", k, " (parameter group ", stack.group,
        ", ", stack.count, " factors of ", stack.size, "×", stack.size, ") failed ", worst,
        " root computations in a row (max_consecutive_root_failures = ", limit,
        "); its preconditioner is stale. diagnostics() counts the failures; a larger root epsilon",
        context.options(stack.group).root().method() == RootMethod::EVD
            ? " usually helps"
            : ", float32 precision or the EVD root method usually helps");
  }
  // Every rank raises: the stack over its limit is another rank's.
  TORCH_CHECK(false,
      "dash::Dash: an inverse root on another rank failed max_consecutive_root_failures computations "
      "in a row; that rank's error names the factor stack");
}

// The roots of `rows` (blocks of a gradient stack whose factors are count factors
// of stack k from `offset`) as operands of the preconditioning products in
// `precision`: the stored roots themselves where their dtype is the operands'
// (float32 roots in FP32, bfloat16 roots in BF16). Else float32 roots are rounded
// to 16 bits (without a workspace limit into a copy of the whole stack made once
// per root computation, not once per step; within one into the chunk's buffers at
// every step), and bfloat16 roots widened into the chunk's buffers.
at::Tensor Engine::preconditioning_roots(
    const StepContext& context, size_t k, int64_t offset, int64_t count, const Rows& rows, MatmulPrecision precision) {
  auto& state = factors_[k];
  // (BF16 is the one 16-bit preconditioning precision: check_options refuses FP16.)
  const auto operand_dtype = linalg::operand_dtype(precision, at::kFloat);
  const bool rounded_copy =
      operand_dtype != at::kFloat && operand_dtype != state.roots.scalar_type() && !context.budget.bounded();
  if (!rounded_copy) {
    state.root_operands = at::Tensor();  // no copy needed now
    state.root_operands_current = false;
  }
  if (!rounded_copy) {
    return linalg::in_dtype(rows.take(state.roots.narrow(0, offset, count)), operand_dtype, block_scratch_);
  }
  if (!state.root_operands.defined()) {
    state.root_operands = at::empty_like(state.roots, state.roots.options().dtype(operand_dtype));
  }
  if (!state.root_operands_current) {
    state.root_operands.copy_(state.roots);
    state.root_operands_current = true;
  }
  return rows.take(state.root_operands.narrow(0, offset, count));
}

// Steps 5–8 of spec §4 for the chosen blocks; hands lr · P to the distributor.
void Engine::write_direction(StepContext& context, size_t s, const Rows& rows) {
  const auto& stack = plan_.gradient_stacks[s];
  const auto& options = context.options(stack.group);
  auto& state = stacks_[s];
  // The gradient is dead once Ĝ and P_g are formed: L̄ Ĝ goes into its buffer, and
  // L̄ Ĝ R̄ into Ĝ's.
  auto grad = gradient_blocks(context, s, rows);
  Workspace work{block_scratch_.empty_like(grad), block_scratch_.empty_like(grad), grad, at::Tensor()};
  work.direction = work.ghat;
  const auto precision = options.preconditioning_precision();
  if (precision != MatmulPrecision::FP32) {
    const auto operands = grad.options().dtype(linalg::operand_dtype(precision, grad.scalar_type()));
    work.ghat_operand = block_scratch_.empty(grad.sizes(), operands);
    work.product_operand = block_scratch_.empty(grad.sizes(), operands);
  }
  const auto hyper = step_hyper(options);
  auto& [grad_correction, stat_correction] = context.corrections[s];
  if (!grad_correction.defined()) {  // the stack's first chunk this step: every block's at once
    grad_correction = bias_correction(hyper.beta_grad, state.moments.steps, hyper.bias_correction);
    stat_correction = bias_correction(hyper.beta_graft, state.moments.steps, hyper.bias_correction);
  }
  const auto stored = take(state.moments, rows);
  auto moments = widened_moments(stored, block_scratch_);
  moments.grad_correction = rows.take(grad_correction);
  moments.stat_correction = rows.take(stat_correction);
  {
    ScopedPhase phase(profile_, Phase::Grafting);
    grafting_direction(grad, moments, hyper, work);
  }

  // Which of these blocks are past t_start (decided on the host copy of t).
  std::vector<bool> started;
  for (auto b : rows.blocks()) started.push_back(state.steps[b] >= options.start_step());
  const auto started_count = std::count(started.begin(), started.end(), true);

  at::Tensor direction = work.graft;
  const bool all_started = started_count == static_cast<int64_t>(started.size());
  // Without momentum, lr scales P together with the grafting norm, saving a pass.
  const bool lr_in_direction = hyper.momentum == 0.0 && all_started;
  {
    ScopedPhase phase(profile_, Phase::Preconditioning);
    if (started_count > 0) {
      auto root_part = [&](int64_t factor_stack, int64_t offset) {
        return factor_stack < 0 ? at::Tensor()
                                : preconditioning_roots(context, static_cast<size_t>(factor_stack), offset,
                                      stack.count(), rows, precision);
      };
      auto preconditioned = preconditioned_direction(work, root_part(stack.left_stack, stack.left_offset),
          root_part(stack.right_stack, stack.right_offset), options.grafting(), lr_in_direction ? options.lr() : 1.0);
      direction = all_started
                      ? preconditioned
                      : at::where(bool_mask(started, grad.device()).view({-1, 1, 1}), preconditioned, work.graft);
    }
    direction = apply_momentum(direction, moments, hyper);
    store_rounded_moments(stored, moments);
    put(state.moments, stored, rows);
    if (!lr_in_direction) direction.mul_(options.lr());
  }
  distributor_->write_blocks(*context.write, s, rows.blocks(), direction, profile_);
}

void Engine::update_adamw_segment(StepContext& context, size_t j) {
  const auto& segment = plan_.adamw_segments[j];
  const auto& options = context.options(segment.group);
  auto& moments = segments_[j].moments;
  ScopedPhase phase(profile_, Phase::Grafting);
  auto grad = adamw_grad_.narrow(0, segment_offsets_[j], segment.numel).view({1, 1, -1});
  bool all_active = true;
  for (auto i : segment.params) all_active = all_active && context.has_grad[i];
  // Parameters without a gradient keep their moments and t: t advances only where
  // active, and the moments are restored where not.
  at::Tensor ema_before;
  at::Tensor statistic_before;
  at::Tensor active;
  if (!all_active) {
    active = at::zeros({1, 1, segment.numel}, grad.options().dtype(at::kBool));
    for (auto i : segment.params) {
      if (context.has_grad[i]) {
        const auto& slot = plan_.parameters[i];
        active.narrow(2, slot.offset - segment.offset, slot.numel).fill_(true);
      }
    }
    ema_before = moments.grad_ema.clone();
    statistic_before = moments.graft_stat.clone();
    moments.steps.add_(active);
  } else {
    moments.steps.add_(1);
  }
  auto& work = segments_[j].work;
  grafting_direction(grad, moments, adamw_hyper(options), work);
  auto& direction = work.graft;
  if (!all_active) {
    moments.grad_ema.copy_(at::where(active, moments.grad_ema, ema_before));
    moments.graft_stat.copy_(at::where(active, moments.graft_stat, statistic_before));
  }
  adamw_update_.narrow(0, segment_offsets_[j], segment.numel).copy_(direction.view(-1)).mul_(options.lr());
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

// Host bookkeeping: which blocks have a gradient this step, and their t.
void Engine::count_active_blocks(StepContext& context) {
  const auto device = params_.front().device();
  context.active.resize(stacks_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    std::vector<bool> mask(stack.count(), false);
    for (int64_t b = 0; b < stack.count(); ++b) {
      if (context.has_grad[stack.block_params[b]]) {
        context.active[s].push_back(b);
        mask[b] = true;
        ++stacks_[s].steps[b];
      }
    }
    const bool complete = static_cast<int64_t>(context.active[s].size()) == stack.count();
    context.stack_complete.push_back(complete);
    const auto start_step = context.options(stack.group).start_step();
    const auto started = std::count_if(context.active[s].begin(), context.active[s].end(),
        [&](int64_t b) { return stacks_[s].steps[b] >= start_step; });
    context.mixed_start.push_back(started > 0 && started < static_cast<int64_t>(context.active[s].size()));
    if (complete) {
      stacks_[s].moments.steps.add_(1);
    } else if (!context.active[s].empty()) {
      stacks_[s].moments.steps.add_(bool_mask(mask, device).view({-1, 1, 1}));
    }
  }
}

// Bytes a chunk of gradient stack s holds per block in the step's factor update
// and direction, whichever is more: the gathered gradient, Ĝ and P_g; in 16-bit
// preconditioning two rounded operands; the chunk's roots as operands where the
// stored ones are not (rounded to 16 bits, or bfloat16 roots widened); bfloat16
// moments and factors widened; the direction of blocks not yet past t_start beside
// the others' (at::where); and where only some blocks take a step (a scattered
// subset, taken by copies) their moments and their factors or roots.
int64_t Engine::chunk_bytes_per_block(const StepContext& context, size_t s) const {
  const auto& stack = plan_.gradient_stacks[s];
  const auto& options = context.options(stack.group);
  const int64_t block = 4 * stack.rows * stack.cols;
  const int64_t factors = 4 * (stack.rows * stack.rows + (stack.one_sided ? 0 : stack.cols * stack.cols));
  const auto precision = options.preconditioning_precision();
  const auto operand_dtype = linalg::operand_dtype(precision, at::kFloat);
  int64_t direction = 3 * block;
  if (precision != MatmulPrecision::FP32) direction += block;
  if (operand_dtype != state_dtype(options.root_precision())) {
    direction += factors * static_cast<int64_t>(c10::elementSize(operand_dtype)) / 4;
  }
  if (options.moment_precision() != MatmulPrecision::FP32) {
    const auto& moments = stacks_[s].moments;
    direction += block * (1 + (moments.graft_stat.defined() ? 1 : 0) + (moments.momentum.defined() ? 1 : 0));
  }
  if (context.mixed_start[s]) direction += block;
  int64_t factor_update = block;
  if (options.factor_precision() != MatmulPrecision::FP32) factor_update += factors;
  if (!context.stack_complete[s]) {
    direction += 3 * block + factors;
    factor_update += factors;
  }
  return std::max(direction, factor_update);
}

// The chunks each phase works on, built once per step (a subset's index goes to
// the device once, not once per phase): per gradient stack, its blocks with a
// gradient in runs that fit the blocks' share of the workspace (one block each
// for Execution::Sequential), each the whole stack, a range of it, or a subset.
std::vector<std::vector<Rows>> Engine::chunks_per_stack(const StepContext& context) const {
  const auto device = params_.front().device();
  std::vector<std::vector<Rows>> chunks_of(stacks_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& active = context.active[s];
    if (active.empty()) continue;
    const auto& stack = plan_.gradient_stacks[s];
    const auto count = static_cast<int64_t>(active.size());
    const int64_t size = context.options(stack.group).execution() == Execution::Sequential
                             ? 1
                             : items_per_chunk(count, chunk_bytes_per_block(context, s), 0, context.budget.blocks());
    at::Tensor indices;  // of the active blocks, sent to the device once for all chunks
    int64_t position = 0;
    for (auto& blocks : split_into_chunks(active, size)) {
      const auto length = static_cast<int64_t>(blocks.size());
      if (length == stack.count()) {
        chunks_of[s].push_back(Rows::all(length));
      } else if (blocks.back() - blocks.front() + 1 == length) {
        chunks_of[s].push_back(Rows::range(blocks.front(), length));
      } else {
        if (!indices.defined()) indices = at::tensor(active, at::kLong).to(device);
        chunks_of[s].push_back(Rows::subset(std::move(blocks), indices.narrow(0, position, length)));
      }
      position += length;
    }
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

void Engine::step(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  step_peak_bytes_ = -1;
  if (!profile_memory_) {
    run_step(groups);
    return;
  }
  const common::MeasureMemoryPeak measure;
  run_step(groups);
  step_peak_bytes_ = measure.peak_bytes();
}

// The state in the groups' factor_precision, root_precision and moment_precision:
// converted where an option changed since the last step.
void Engine::convert_state_precision(const StepContext& context) {
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto dtype = state_dtype(context.options(plan_.gradient_stacks[s].group).moment_precision());
    auto& moments = stacks_[s].moments;
    for (auto* moment : {&moments.grad_ema, &moments.graft_stat, &moments.momentum}) convert_state(*moment, dtype);
  }
  for (size_t k = 0; k < factors_.size(); ++k) {
    const auto& options = context.options(plan_.factor_stacks[k].group);
    auto& state = factors_[k];
    if (options.factor_precision() == MatmulPrecision::BF16) {
      TORCH_WARN_ONCE(
          "dash::Dash: factor_precision bf16 keeps 8 significant bits of the factors, which loses their small "
          "eigenvalues: in dash-train's comparison training ended 0.06 (EVD) to 0.62 (NewtonDB, most of whose roots "
          "failed) nats/byte worse than with fp32 factors (docs/results.md, \"16-bit optimizer state\"); bf16 roots "
          "and moments trained as fp32 state");
    }
    convert_state(state.factors, state_dtype(options.factor_precision()));
    if (convert_state(state.roots, state_dtype(options.root_precision()))) {
      state.root_operands = at::Tensor();
      state.root_operands_current = false;
    }
  }
}

void Engine::run_step(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  StepContext context;
  context.groups = &groups;
  if (params_.empty()) return;
  convert_state_precision(context);
  context.budget = step_budget(groups);
  // The scratches only grow: buffers made for no limit or a larger one go.
  if (context.budget.bounded() && (workspace_limit_bytes_ == 0 || context.budget.limit < workspace_limit_bytes_)) {
    block_scratch_ = linalg::Scratch();
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
  context.corrections.resize(stacks_.size());
  const auto chunks_of = chunks_per_stack(context);
  auto for_each_chunk = [&](auto&& work) {
    for (size_t s = 0; s < stacks_.size(); ++s) {
      for (const auto& rows : chunks_of[s]) work(s, rows);
    }
  };
  for_each_chunk([&](size_t s, const Rows& rows) { update_factors(context, s, rows); });
  for (size_t k = 0; k < factors_.size(); ++k) refresh_roots(context, k);
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
}

}  // namespace dash::optim
