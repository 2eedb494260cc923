// The engine's reports (diagnostics, the state's and the workspaces' bytes) and its
// hand-overs to the engine that replaces it (rebuilt groups, added groups). The
// state's checkpoint is keyed by parameter (engine_parameter_state.cpp).

#include "optim/engine.h"

#include <dash/distributed.h>

#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/state_fields.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

namespace dash::optim {

DashDiagnostics Engine::diagnostics(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  DashDiagnostics result;
  for (const auto& family : families_) family->diagnose(groups, result);
  for (const auto& stack : plan_.gradient_stacks) {
    result.block_stacks.push_back({stack.group, stack.rows, stack.cols, stack.count(), stack.one_sided});
  }
  result.steps_taken = steps_taken_;
  result.skipped_steps = skipped_steps_;
  result.overflow_skipped_steps = overflow_skipped_steps_;
  result.state_bytes = state_bytes();
  result.workspace_bytes = workspace_bytes();
  result.unchunked_workspace_bytes = unchunked_workspace_bytes();
  result.workspace_limit_bytes = workspace_limit_bytes_;
  result.step_peak_bytes = step_peak_bytes_;
  return result;
}

namespace {
int64_t bytes_of(const at::Tensor& tensor) { return tensor.defined() ? static_cast<int64_t>(tensor.nbytes()) : 0; }
}  // namespace

int64_t Engine::workspace_bytes() const {
  int64_t bytes = unchunked_workspace_bytes() + root_workspace_.bytes() + block_scratch_.bytes();
  // (and 12 bytes of host memory, decision_on_host_)
  bytes += bytes_of(magnitudes_) + bytes_of(failure_worst_) + bytes_of(decision_);
  for (const auto& stack : stacks_) {
    bytes += bytes_of(stack.gathered) + bytes_of(stack.grad_correction) + bytes_of(stack.stat_correction) +
             bytes_of(stack.active_indices) + bytes_of(stack.active_mask);
  }
  for (const auto& family : families_) bytes += family->workspace_bytes();
  return bytes;
}

int64_t Engine::unchunked_workspace_bytes() const {
  int64_t bytes = bytes_of(adamw_grad_) + bytes_of(adamw_update_);
  if (distributor_) bytes += distributor_->workspace_bytes();
  for (const auto& segment : segments_) {
    bytes += bytes_of(segment.work.ghat) + bytes_of(segment.work.graft) + bytes_of(segment.grad_correction) +
             bytes_of(segment.stat_correction);
    for (const auto& kept : segment.kept_without_gradient) bytes += bytes_of(kept);
  }
  return bytes;
}

int64_t Engine::state_bytes() const {
  int64_t bytes = 0;
  auto add = [&](const at::Tensor& tensor) { bytes += bytes_of(tensor); };
  for (const auto& stack : stacks_) {
    for (const auto& field : moment_fields) add(stack.moments.*field.tensor);
  }
  for (const auto& segment : segments_) {
    for (const auto& field : moment_fields) add(segment.moments.*field.tensor);
  }
  for (const auto& family : families_) family->for_each_state_tensor(add);
  return bytes;
}

void Engine::continue_from(const Engine& previous) {
  skipped_steps_ = previous.skipped_steps_;
  overflow_skipped_steps_ = previous.overflow_skipped_steps_;
  profile_.enable(previous.profile_.enabled());
  profile_memory_ = previous.profile_memory_;
}

void Engine::adopt_state(Engine&& previous) {
  TORCH_CHECK(!distributed_ || distributed_->world_size() == 1,
      "dash::Dash: add_param_group after the first step is not supported with several ranks (they would split the "
      "blocks anew); add every parameter group before stepping");
  // plan_stacks() numbers stacks, factor stacks and AdamW segments group by group, so
  // the previous plan's are this one's first ones, unchanged.
  auto same_gradient_stack = [](const blocking::GradientStack& a, const blocking::GradientStack& b) {
    return a.group == b.group && a.rows == b.rows && a.cols == b.cols && a.one_sided == b.one_sided &&
           a.block_params == b.block_params && a.left_stack == b.left_stack && a.left_offset == b.left_offset &&
           a.right_stack == b.right_stack && a.right_offset == b.right_offset;
  };
  // Every check before anything moves: a failed one leaves `previous` whole.
  const auto& old_plan = previous.plan_;
  TORCH_INTERNAL_ASSERT(old_plan.gradient_stacks.size() <= plan_.gradient_stacks.size() &&
                        old_plan.factor_stacks.size() <= plan_.factor_stacks.size() &&
                        old_plan.adamw_segments.size() <= plan_.adamw_segments.size());
  for (size_t s = 0; s < old_plan.gradient_stacks.size(); ++s) {
    TORCH_INTERNAL_ASSERT(same_gradient_stack(old_plan.gradient_stacks[s], plan_.gradient_stacks[s]));
  }
  for (size_t k = 0; k < old_plan.factor_stacks.size(); ++k) {
    const auto& a = old_plan.factor_stacks[k];
    const auto& b = plan_.factor_stacks[k];
    TORCH_INTERNAL_ASSERT(a.group == b.group && a.size == b.size && a.root == b.root && a.count == b.count);
  }
  for (size_t j = 0; j < old_plan.adamw_segments.size(); ++j) {
    TORCH_INTERNAL_ASSERT(old_plan.adamw_segments[j].params == plan_.adamw_segments[j].params);
  }
  // The earlier groups come first, so their families are this engine's first ones.
  const auto& old_families = previous.family_of_group_;
  TORCH_INTERNAL_ASSERT(old_families.size() <= family_of_group_.size() &&
                        std::equal(old_families.begin(), old_families.end(), family_of_group_.begin()));
  for (size_t f = 0; f < previous.families_.size(); ++f) families_[f]->adopt(*previous.families_[f]);
  std::move(previous.stacks_.begin(), previous.stacks_.end(), stacks_.begin());
  std::move(previous.host_steps_.begin(), previous.host_steps_.end(), host_steps_.begin());
  std::move(previous.segments_.begin(), previous.segments_.end(), segments_.begin());
  steps_taken_ = previous.steps_taken_;
  factor_resets_reported_ = previous.factor_resets_reported_;
  continue_from(previous);
}

}  // namespace dash::optim
