// The engine's checkpoint and reports: its state tensors under stable keys, the
// counters and per-stack choices that a resumed run needs to continue alike, and
// the diagnostics built from them. dash::Dash saves the groups' options and
// forwards the rest here.

#include "optim/engine.h"

#include <dash/distributed.h>

#include "optim/dash_options.h"
#include "optim/distributor.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <string>

namespace dash::optim {

template <typename Self, typename Visit>
void Engine::for_each_state_tensor(Self& engine, Visit&& visit) {
  auto moments = [&](const std::string& prefix, auto& state) {
    visit(prefix + ".grad_ema", state.grad_ema);
    visit(prefix + ".graft_stat", state.graft_stat);
    visit(prefix + ".momentum", state.momentum);
    visit(prefix + ".steps", state.steps);
  };
  for (size_t s = 0; s < engine.stacks_.size(); ++s) moments("stack." + std::to_string(s), engine.stacks_[s].moments);
  for (size_t k = 0; k < engine.factors_.size(); ++k) {
    const auto prefix = "factor." + std::to_string(k);
    auto& factor = engine.factors_[k];
    visit(prefix + ".factors", factor.factors);
    visit(prefix + ".roots", factor.roots);
    visit(prefix + ".failures", factor.failures);
    // Defined only once a warm-started EVD has run, or once the stack's first root
    // was computed (see load()).
    visit(prefix + ".eigenvectors", factor.basis.vectors);
    visit(prefix + ".eigenbasis_valid", factor.basis.valid);
    visit(prefix + ".refresh_counts", factor.refresh_counts);
    visit(prefix + ".consecutive_failures", factor.consecutive_failures);
    visit(prefix + ".factor_resets", factor.factor_resets);
  }
  for (size_t j = 0; j < engine.segments_.size(); ++j) {
    moments("segment." + std::to_string(j), engine.segments_[j].moments);
  }
}

// Describes everything the state's shapes depend on; a checkpoint only loads into
// an optimizer with the same description.
std::string Engine::layout_signature(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  return layout_signature_of(groups, stacks_.size(), factors_.size(),
      distributed_ ? std::optional(std::pair(distributed_->rank(), distributed_->world_size())) : std::nullopt);
}

std::string Engine::layout_signature_of(const std::vector<torch::optim::OptimizerParamGroup>& groups, size_t stacks,
    size_t factors, std::optional<std::pair<int64_t, int64_t>> rank_of_world) {
  std::string signature = groups_signature(groups);
  signature += "stacks " + std::to_string(stacks) + " factors " + std::to_string(factors);
  if (rank_of_world) {
    // Each rank's checkpoint holds its share of the blocks, which depends on both.
    signature += "\nrank " + std::to_string(rank_of_world->first) + " of " + std::to_string(rank_of_world->second);
  }
  return signature;
}

DashDiagnostics Engine::diagnostics(const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  DashDiagnostics result;
  for (size_t k = 0; k < factors_.size(); ++k) {
    const auto& stack = plan_.factor_stacks[k];
    const auto& state = factors_[k];
    const auto& options = options_of(groups[stack.group]);
    result.factor_stacks.push_back({stack.group, stack.size, stack.count, stack.root, state.failures.item<int64_t>(),
        options.execution() == Execution::Auto ? state.root_execution : options.execution(),
        state.calibrated_batched_ms, state.calibrated_per_block_ms});
    auto& entry = result.factor_stacks.back();
    if (state.refresh_counts.defined()) {
      const auto counts = state.refresh_counts.cpu();
      entry.roots_kept = counts[0].item<int64_t>();
      entry.roots_warm_started = counts[1].item<int64_t>();
      entry.roots_recomputed = counts[2].item<int64_t>();
    }
    if (state.factor_resets.defined()) entry.factor_resets = state.factor_resets.item<int64_t>();
    const bool auto_method = options.root().method() == RootMethod::Auto;
    entry.root_method = auto_method ? state.root_method : options.root().method();
    if (auto_method) entry.root_method_trials = state.root_method_trials;
    entry.newton_db_evaluation = resolve_newton_db_evaluation(options.root(), state.factors.device());
  }
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
  for (const auto& factor : factors_) bytes += bytes_of(factor.root_operands);
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
  for_each_state_tensor(*this, [&](const std::string&, const at::Tensor& tensor) {
    if (tensor.defined()) bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  });
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
  std::move(previous.stacks_.begin(), previous.stacks_.end(), stacks_.begin());
  std::move(previous.factors_.begin(), previous.factors_.end(), factors_.begin());
  std::move(previous.segments_.begin(), previous.segments_.end(), segments_.begin());
  steps_taken_ = previous.steps_taken_;
  factor_resets_total_ = previous.factor_resets_total_;
  factor_resets_reported_ = previous.factor_resets_reported_;
  continue_from(previous);
}

void Engine::save(
    torch::serialize::OutputArchive& archive, const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  archive.write("dash.layout", c10::IValue(layout_signature(groups)));
  archive.write("dash.steps_taken", c10::IValue(steps_taken_));
  archive.write("dash.skipped_steps", c10::IValue(skipped_steps_));
  archive.write("dash.overflow_skipped_steps", c10::IValue(overflow_skipped_steps_));
  for (size_t s = 0; s < stacks_.size(); ++s) {
    archive.write("stack." + std::to_string(s) + ".host_steps", at::tensor(stacks_[s].steps, at::kLong));
  }
  // Execution::Auto's and RootMethod::Auto's choices, so that a resumed run computes
  // its roots the same way.
  for (size_t k = 0; k < factors_.size(); ++k) {
    archive.write("factor." + std::to_string(k) + ".root_execution",
        c10::IValue(static_cast<int64_t>(factors_[k].root_execution)));
    archive.write(
        "factor." + std::to_string(k) + ".root_method", c10::IValue(static_cast<int64_t>(factors_[k].root_method)));
  }
  for_each_state_tensor(*this, [&](const std::string& key, const at::Tensor& tensor) {
    if (tensor.defined()) archive.write(key, tensor, /*is_buffer=*/true);
  });
}

void Engine::load(
    torch::serialize::InputArchive& archive, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  TORCH_INTERNAL_ASSERT(steps_taken_ == 0, "Engine::load: into a fresh engine only");
  auto read_value = [&](const std::string& key) {
    c10::IValue value;
    archive.read(key, value);
    return value;
  };
  const auto saved_layout = read_value("dash.layout").toStringRef();
  const auto layout = layout_signature(groups);
  TORCH_CHECK(saved_layout == layout,
      "dash::Dash: the checkpoint was saved for other parameters or options.\ncheckpoint:\n", saved_layout,
      "\nthis optimizer:\n", layout);
  steps_taken_ = read_value("dash.steps_taken").toInt();
  skipped_steps_ = read_value("dash.skipped_steps").toInt();
  c10::IValue overflow_skipped;  // absent from checkpoints written before it was counted
  if (archive.try_read("dash.overflow_skipped_steps", overflow_skipped)) {
    overflow_skipped_steps_ = overflow_skipped.toInt();
  }
  for (size_t s = 0; s < stacks_.size(); ++s) {
    at::Tensor host_steps;
    archive.read("stack." + std::to_string(s) + ".host_steps", host_steps, /*is_buffer=*/true);
    TORCH_CHECK(host_steps.numel() == static_cast<int64_t>(stacks_[s].steps.size()),
        "dash::Dash: corrupt checkpoint (stack ", s, " step counts)");
    auto values = host_steps.to(at::kLong).contiguous();
    stacks_[s].steps.assign(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
  }
  for (size_t k = 0; k < factors_.size(); ++k) {
    c10::IValue choice;
    if (!archive.try_read("factor." + std::to_string(k) + ".root_execution", choice)) continue;  // older checkpoint
    const auto value = choice.toInt();
    TORCH_CHECK(value >= 0 && value <= static_cast<int64_t>(Execution::Auto),
        "dash::Dash: corrupt checkpoint (factor stack ", k, " root execution ", value, ")");
    auto& state = factors_[k];
    state.root_execution = static_cast<Execution>(value);
    state.calibration_pending = state.root_execution == Execution::Auto;
    c10::IValue method;
    if (!archive.try_read("factor." + std::to_string(k) + ".root_method", method)) continue;  // older checkpoint
    TORCH_CHECK(method.toInt() >= 0 && method.toInt() <= static_cast<int64_t>(RootMethod::Auto),
        "dash::Dash: corrupt checkpoint (factor stack ", k, " root method ", method.toInt(), ")");
    state.root_method = static_cast<RootMethod>(method.toInt());
  }
  const auto device = params_.empty() ? at::Device(at::kCPU) : params_.front().device();
  for_each_state_tensor(*this, [&](const std::string& key, at::Tensor& tensor) {
    if (!tensor.defined()) {
      // The state a fresh engine allocates only on first use (a warm-started EVD's
      // eigenbasis, in factor stacks) is taken as saved, when it was.
      at::Tensor saved;
      if (key.rfind("factor.", 0) == 0 && archive.try_read(key, saved, /*is_buffer=*/true)) tensor = saved.to(device);
      return;
    }
    at::Tensor saved;
    archive.read(key, saved, /*is_buffer=*/true);
    TORCH_CHECK(saved.sizes() == tensor.sizes() && saved.scalar_type() == tensor.scalar_type(),
        "dash::Dash: corrupt checkpoint: '", key, "' has shape ", saved.sizes(), " ", saved.scalar_type(),
        ", expected ", tensor.sizes(), " ", tensor.scalar_type());
    tensor.copy_(saved);
  });
}

}  // namespace dash::optim
