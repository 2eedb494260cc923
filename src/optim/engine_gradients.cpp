// The step's gradients in (Engine's "copies" phase): which parameters have one, the
// check that decides whether the step is taken, and the gathers of gradient blocks
// into the stacks' buffers.

#include "optim/engine.h"

#include "kernels/matrix_transfer.h"
#include "kernels/stack_reductions.h"
#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/failure_limit.h"
#include "optim/host_masks.h"
#include "optim/parameter_checks.h"
#include "optim/rank_agreement.h"
#include "optim/step_context.h"
#include "optim/unusable_gradients.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::optim {

// Which parameters have a gradient this step, as the distributor makes them; rejects
// gradients the step cannot use. Returns false when there is nothing to do: no
// parameter with an element has a gradient (such a step is not counted, as
// torch.optim's optimizers create no state; ranks decide that together).
bool Engine::collect_gradients(StepContext& context) {
  context.has_grad = parameters_with_gradients(params_, context.gradients, param_shapes_);
  // Under Zero, their gradients are averaged over the ranks now.
  return distributor_->receive_gradients(params_, context.gradients, context.has_grad, profile_);
}

// The gradients this process uses, for the check: with every gradient gathered, the
// gathered buffers (each element this process uses is in a stack or a segment, as
// float32); within a workspace limit, which gathers the blocks chunk by chunk later,
// the gradients of the parameters whose blocks or segments this process computes.
// Groups whose gradients go unchecked are left out.
std::vector<at::Tensor> Engine::checked_gradients(const StepContext& context) const {
  std::vector<at::Tensor> checked;
  if (context.keep_gradients) {
    for (size_t s = 0; s < stacks_.size(); ++s) {
      if (context.checks(plan_.gradient_stacks[s].group)) checked.push_back(stacks_[s].gathered);
    }
    const auto& segments = plan_.adamw_segments;
    if (std::all_of(segments.begin(), segments.end(), [&](const auto& s) { return context.checks(s.group); })) {
      checked.push_back(adamw_grad_);  // one tensor: one reduction
      return checked;
    }
    for (size_t j = 0; j < segments.size(); ++j) {
      if (context.checks(segments[j].group))
        checked.push_back(adamw_grad_.narrow(0, segment_offsets_[j], segments[j].numel));
    }
    return checked;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (context.has_grad[i] && param_use_[i] == ParamUse::Whole && context.checks(plan_.parameters[i].group)) {
      checked.push_back(context.gradients[i]);
    }
  }
  // A parameter only some of whose blocks are this rank's: the rectangles of those
  // blocks' regions, as matrices whose rows are contiguous (one pass each, no copy;
  // under Zero the other blocks hold this rank's own, unaveraged gradients).
  for (const auto& stack : plan_.gradient_stacks) {
    for (const auto& region : stack.regions) {
      const auto i = static_cast<size_t>(region.param);
      if (!context.has_grad[i] || param_use_[i] != ParamUse::Part || !context.checks(stack.group)) continue;
      checked.push_back(blocking::as_matrix(context.gradients[i], plan_.parameters[i].view)
                            .narrow(0, region.row, region.grid_rows * region.block_rows)
                            .narrow(1, region.col, region.grid_cols * region.block_cols));
    }
  }
  return checked;
}

// The step's one read back to the host: the largest magnitude of the checked
// gradients (NaN when an entry is NaN: the reductions propagate it), one pass over
// them all and no mask (kernels::largest_magnitude_of_list), and whether some
// family's amortised item (a factor's root) has reached its group's failure limit
// (failure_excess_into),
// both as every rank sees them (the distributor's maximum over the ranks, so that
// all decide alike); with them the count of the families' resets so far, so that
// a reset is announced without a read of its own.
// Returns false when the step is to be skipped: a non-finite gradient
// (non_finite_gradients) or one above overflow_limit() (always skipped: the
// float32 statistics would overflow and no later root could be computed).
// In one process, groups that leave their gradients unchecked and have no failure
// limit need no decision: a step of only such groups reads nothing back. Ranks
// always decide: the decision's all-reduce is also where replicated ranks check
// that they agree on which parameters have gradients and hold the same options
// (optim/rank_agreement.h), and no rank may leave a collective the others enter.
bool Engine::gradients_usable(StepContext& context) {
  const bool ranks = distributed_ && distributed_->world_size() > 1;
  context.decision_read = ranks;
  for (size_t g = 0; g < context.groups->size() && !context.decision_read; ++g) {
    const auto group = static_cast<int64_t>(g);
    context.decision_read = context.checks(group) || context.options(group).max_consecutive_root_failures() > 0;
  }
  if (!context.decision_read) return true;
  // Into buffers kept across steps: [largest magnitude, past the failure limit, the
  // agreed options' fingerprint h and −h (ranks: all equal iff max h = −max −h),
  // resets] on the parameters' device, and its host copy (no allocation in a step).
  std::vector<FailureRecord> records;
  for (const auto& family : families_) family->failure_records(*context.groups, records);
  if (!decision_.defined()) {
    decision_ = at::zeros({5}, adamw_grad_.options().dtype(at::kFloat));
    decision_on_host_ = at::zeros({5}, at::TensorOptions().dtype(at::kFloat));
    failure_worst_ = at::zeros({static_cast<int64_t>(records.size()) + 1}, adamw_grad_.options().dtype(at::kLong));
  }
  // (No gradients to check: nothing to skip for; a zero stands in.)
  const auto gradients = checked_gradients(context);
  if (gradients.empty()) {
    decision_.select(0, 0).zero_();
  } else {
    decision_.select(0, 0).copy_(kernels::largest_magnitude_of_list(gradients, magnitudes_));
  }
  failure_excess_into(decision_.select(0, 1), failure_worst_, records, *context.groups);
  const float fingerprint = ranks ? agreed_options_fingerprint(*context.groups) : 0.0f;
  if (ranks) {
    decision_.select(0, 2).fill_(fingerprint);
    decision_.select(0, 3).fill_(-fingerprint);
  }
  families_resets_into(decision_.select(0, 4));
  auto agreed = decision_.narrow(0, 0, 4);
  distributor_->take_maximum_over_ranks(agreed);
  decision_on_host_.copy_(decision_);
  const auto* host = decision_on_host_.data_ptr<float>();
  // Before anything of this step changes: ranks whose options differ, the failures
  // of earlier steps.
  if (ranks && (host[2] != fingerprint || host[3] != -fingerprint)) raise_option_disagreement(*context.groups);
  if (host[1] > 0.0f) raise_failure_limit(records, *context.groups);
  const double largest = host[0];
  announce_factor_resets(static_cast<int64_t>(host[4]));
  if (largest <= overflow_limit_) return true;  // false for NaN
  auto policy = [&](size_t i) { return context.options(plan_.parameters[i].group).non_finite_gradients(); };
  auto checked = context.has_grad;  // the parameters whose gradients the largest magnitude covers
  for (size_t i = 0; i < params_.size(); ++i) checked[i] = checked[i] && context.checks(plan_.parameters[i].group);
  const auto reason =
      judge_unusable_gradients(params_, context.gradients, checked, policy, largest, overflow_limit_, *distributor_);
  ++(reason == SkipReason::Overflow ? overflow_skipped_steps_ : skipped_steps_);
  return false;
}

// The families' resets so far, summed into `into` on the device (the first family's
// copied, any other's added: nothing allocated).
void Engine::families_resets_into(at::Tensor into) const {
  bool first = true;
  for (const auto& family : families_) {
    if (!family->resets_total().defined()) continue;
    if (first) {
      into.copy_(family->resets_total());
    } else {
      into.add_(family->resets_total());
    }
    first = false;
  }
  if (first) into.zero_();
}

// The ranks' options differ (every rank finds it in the same decision): one more
// collective, on this rare path, names which, on every rank alike.
void Engine::raise_option_disagreement(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  auto extremes = agreed_option_extremes(groups, adamw_grad_.device());
  distributor_->take_maximum_over_ranks(extremes);
  std::string names;
  for (const auto& name : disagreeing_options(groups, extremes)) names += (names.empty() ? "" : ", ") + name;
  TORCH_CHECK_VALUE(false, "dash::Dash: rank ", distributed_->rank(), " of ", distributed_->world_size(),
      ": the ranks' options differ (", names.empty() ? std::string("some option") : names,
      "); each rank steps its own blocks with its own options, so every rank must hold the same (a scheduler or "
      "param-group edit run on some ranks only?). The step was not taken");
}

// Warns of the factors reset since the last warning (`resets`: how many so far).
void Engine::announce_factor_resets(int64_t resets) {
  if (resets <= factor_resets_reported_) return;
  TORCH_WARN("dash::Dash: ", resets - factor_resets_reported_,
      " factor(s) had overflowed, or were about to (entries above FLT_MAX/(16 b)), and were restarted from zero "
      "at the last root computation; diagnostics().factor_stacks[k].factor_resets counts them");
  factor_resets_reported_ = resets;
}

// Moves the AdamW parameters' gradients into their packed segments and, without a
// workspace limit, each gradient into its blocks' stacks, a strided view per
// region (a parameter that tiles into B × B blocks is one region): one transfer
// of all of them (kernels/matrix_transfer.h), no flat concatenation of all gradients.
void Engine::gather_gradients(const StepContext& context) {
  std::vector<kernels::ViewPair> regions;
  for (size_t s = 0; s < stacks_.size() && context.keep_gradients; ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    auto& gathered = stacks_[s].gathered;
    if (!gathered.defined()) gathered = at::empty({stack.count(), stack.rows, stack.cols}, adamw_grad_.options());
    for (const auto& region : stack.regions) {
      const auto i = static_cast<size_t>(region.param);
      auto blocks = blocking::region_in_stack(gathered, region);
      if (context.has_grad[i]) {
        regions.push_back({blocks,
            blocking::region_in_matrix(blocking::as_matrix(context.gradients[i], plan_.parameters[i].view), region)});
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
        regions.push_back({part, context.gradients[i].reshape(-1)});
      } else {
        part.zero_();
      }
    }
  }
  kernels::transfer_matrices(regions, kernels::Transfer::Copy);
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
  if (gathered.defined()) return rows.take(gathered, subset_scratch(context));
  const auto& stack = plan_.gradient_stacks[s];
  auto blocks =
      block_scratch_.empty({static_cast<int64_t>(rows.blocks().size()), stack.rows, stack.cols}, adamw_grad_.options());
  std::vector<at::Tensor> matrices(params_.size());  // a gradient's matrix view, once per parameter
  std::vector<kernels::ViewPair> pairs;
  for (const auto& piece : blocking::regions_of_blocks(stack.regions, rows.blocks())) {
    auto& matrix = matrices[piece.param];
    if (!matrix.defined())
      matrix = blocking::as_matrix(context.gradients[piece.param], plan_.parameters[piece.param].view);
    pairs.push_back({blocking::region_in_stack(blocks, piece), blocking::region_in_matrix(matrix, piece)});
  }
  kernels::transfer_matrices(pairs, kernels::Transfer::Copy);
  return context.options(stack.group).maximize() ? blocks.neg_() : blocks;
}

// Which blocks have a gradient this step, their t (on the host and the device), and
// the stacks' bias corrections for that t.
void Engine::count_active_blocks(StepContext& context) {
  context.active.resize(stacks_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    for (int64_t b = 0; b < stack.count(); ++b) {
      if (context.has_grad[stack.block_params[b]]) {
        context.active[s].push_back(b);
        ++host_steps_[s][b];
      }
    }
    const bool complete = static_cast<int64_t>(context.active[s].size()) == stack.count();
    context.stack_complete.push_back(complete);
    auto& steps = stacks_[s].moments.steps;
    const auto runs = complete ? std::vector<BlockRun>{} : consecutive_runs(context.active[s]);
    if (complete) {
      steps.add_(1);
    } else if (static_cast<int64_t>(runs.size()) <= kMostRunsPerChunk) {
      // A slice per run of active blocks: no mask to send to the device.
      for (const auto& run : runs) steps.narrow(0, run.block, run.length).add_(1);
    } else {
      // Scattered blocks: one mask (t's dtype: adds 1 exactly) rather than a launch per run.
      std::vector<float> mask(stack.count(), 0.0f);
      for (auto b : context.active[s]) mask[b] = 1.0f;
      steps.add_(values_into(stacks_[s].active_mask, mask, steps.device()).view({-1, 1, 1}));
    }
    // 1 − β^t of every block at once, whatever chunks follow: an element-wise exp runs
    // in SIMD lanes or in a loop's scalar tail depending on where an element sits, so
    // a block's value would otherwise depend on its chunk.
    if (!context.active[s].empty()) {
      const auto hyper = step_hyper(context.options(stack.group));
      auto& state = stacks_[s];
      bias_correction_into(state.grad_correction, hyper.beta_grad, state.moments.steps, hyper.bias_correction);
      bias_correction_into(state.stat_correction, hyper.beta_graft, state.moments.steps, hyper.bias_correction);
    }
  }
}

}  // namespace dash::optim
