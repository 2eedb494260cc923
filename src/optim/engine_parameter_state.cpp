// The state keyed by parameter, under names that do not depend on the world size:
// each block's state as "block.<j>.<name>", j the block's number among its
// parameter's blocks in the whole plan (blocking::parameter_block_numbers), and an
// AdamW parameter's moments in the parameter's own shape. A rank holds the entries
// of the blocks it owns, so the union of every rank's entries is the whole state,
// and any world size finds its blocks' entries in it (torch.distributed.checkpoint
// saves each entry once and loads each where it is asked for).

#include "optim/engine.h"

#include <dash/distributed.h>

#include "distributed/work_split.h"
#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/state_rows.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

namespace dash::optim {
namespace {

constexpr const char* kSides[] = {"left", "right"};
// A block's entries besides its moments, per side: required, then optional
// (allocated on first use), then the stack's choices.
constexpr const char* kFactorFields[] = {
    "factor_", "root_", "consecutive_failures_", "eigenvectors_", "eigenbasis_valid_", "root_choice_"};
constexpr const char* kMomentNames[] = {"grad_ema", "graft_stat", "momentum", "step"};

std::string block_prefix(int64_t number) { return "block." + std::to_string(number) + "."; }

// A block's factor rows, (factor stack, offset of the stack's block 0) per side:
// left, then right unless one-sided.
std::vector<std::pair<size_t, int64_t>> factor_sides(const blocking::GradientStack& stack) {
  std::vector<std::pair<size_t, int64_t>> sides{{static_cast<size_t>(stack.left_stack), stack.left_offset}};
  if (!stack.one_sided) sides.emplace_back(static_cast<size_t>(stack.right_stack), stack.right_offset);
  return sides;
}

// Whether a factor stack of a group with `options` may keep a warm eigenbasis
// (RootMethod::Auto may choose EVD).
bool may_warm_start(const DashOptions& options) {
  const auto method = options.root().method();
  return options.root().eigen().refresh_tolerance() > 0.0 && (method == RootMethod::EVD || method == RootMethod::Auto);
}

// Whether `field` is the name of a block's entry ("grad_ema", "factor_left", ...).
bool is_block_field(const std::string& field) {
  if (std::find(std::begin(kMomentNames), std::end(kMomentNames), field) != std::end(kMomentNames)) return true;
  for (const char* prefix : kFactorFields) {
    for (const char* side : kSides) {
      if (field == std::string(prefix) + side) return true;
    }
  }
  return false;
}

// One parameter's entries by name, checked against the names a parameter with
// `blocks` blocks (0: an AdamW parameter) can have.
std::map<std::string, at::Tensor> entries_by_name(const ParameterState& state, size_t param, int64_t blocks) {
  std::map<std::string, at::Tensor> entries;
  for (const auto& [name, tensor] : state) {
    bool known = false;
    if (blocks > 0 && name.rfind("block.", 0) == 0) {
      const auto dot = name.find('.', 6);
      const auto number = name.substr(6, dot == std::string::npos ? std::string::npos : dot - 6);
      // Digits as std::to_string writes them (no sign, no leading zero): one name per block.
      const bool numeric = !number.empty() && number.size() < 10 && (number == "0" || number[0] != '0') &&
                           std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; });
      known =
          numeric && dot != std::string::npos && std::stoll(number) < blocks && is_block_field(name.substr(dot + 1));
    } else if (blocks == 0) {
      known = std::find(std::begin(kMomentNames), std::end(kMomentNames), name) != std::end(kMomentNames);
    }
    TORCH_CHECK(known, "dash::Dash: parameter ", param, "'s state has an entry '", name, "' that a parameter of ",
        blocks > 0 ? std::to_string(blocks) + " blocks" : std::string("AdamW"),
        " does not have (saved for other parameters or options?)");
    TORCH_CHECK(tensor.defined(), "dash::Dash: parameter ", param, "'s state entry '", name, "' is undefined");
    entries.emplace(name, tensor);
  }
  return entries;
}

// Copies the saved entry into `into` (a row or a view of this engine's state),
// which must have its shape and dtype.
void copy_entry(at::Tensor into, const at::Tensor& saved, size_t param, const std::string& name) {
  TORCH_CHECK(saved.sizes() == into.sizes() && saved.scalar_type() == into.scalar_type(), "dash::Dash: parameter ",
      param, "'s state entry '", name, "' is ", saved.sizes(), " ", saved.scalar_type(), ", this optimizer's ",
      into.sizes(), " ", into.scalar_type(), " (saved for other parameters or options?)");
  into.copy_(saved);
}

// Every parameter's saved entries by name, and the copies from them into an engine's
// state.
class SavedEntries {
 public:
  SavedEntries(const std::vector<ParameterState>& states, const std::vector<int64_t>& blocks) {
    for (size_t p = 0; p < states.size(); ++p) saved_.push_back(entries_by_name(states[p], p, blocks[p]));
  }

  at::Tensor find(size_t param, const std::string& name) const {
    const auto found = saved_[param].find(name);
    return found == saved_[param].end() ? at::Tensor() : found->second;
  }

  at::Tensor required(size_t param, const std::string& name) const {
    auto tensor = find(param, name);
    TORCH_CHECK(tensor.defined(), "dash::Dash: parameter ", param, "'s state has no '", name,
        "' (one rank's state dict on another world size? load_sharded_state_dicts takes every rank's)");
    return tensor;
  }

  // Moments: each one this engine keeps is required, and none it does not keep may
  // be given. `part` gives a moment's part that holds the parameter's (or block's).
  template <typename Part>
  void copy_moments(const MomentState& into, size_t param, const std::string& prefix, Part&& part) const {
    for (const auto& [name, tensor] : moment_fields(into)) {
      if (tensor->defined()) {
        copy_entry(part(*tensor), required(param, prefix + name), param, prefix + name);
      } else {
        TORCH_CHECK(!find(param, prefix + name).defined(), "dash::Dash: parameter ", param, "'s state has '",
            prefix + name, "', which these options do not keep (saved with other options?)");
      }
    }
  }

  // One block's factor and root on `side` into row r of `factor`, with its optional
  // rows; returns the stack's saved choices (execution, method; -1 when not saved).
  std::pair<int64_t, int64_t> copy_factor_row(
      FactorStackState& factor, int64_t r, size_t param, const std::string& prefix, const char* side) const {
    const auto name = [&](const char* field) { return prefix + field + side; };
    copy_entry(factor.factors.select(0, r), required(param, name("factor_")), param, name("factor_"));
    copy_entry(factor.roots.select(0, r), required(param, name("root_")), param, name("root_"));
    const auto vectors = find(param, name("eigenvectors_"));
    const auto valid = find(param, name("eigenbasis_valid_"));
    TORCH_CHECK(vectors.defined() == valid.defined(), "dash::Dash: parameter ", param, "'s state has one of '",
        name("eigenvectors_"), "' and '", name("eigenbasis_valid_"), "' without the other");
    copy_optional_row(factor, OptionalRow::ConsecutiveFailures, r, find(param, name("consecutive_failures_")),
        name("consecutive_failures_"));
    copy_optional_row(factor, OptionalRow::Eigenvectors, r, vectors, name("eigenvectors_"));
    copy_optional_row(factor, OptionalRow::EigenbasisValid, r, valid, name("eigenbasis_valid_"));
    const auto choice = find(param, name("root_choice_"));
    TORCH_CHECK(!choice.defined() || choice.numel() == 2, "dash::Dash: parameter ", param, "'s '", name("root_choice_"),
        "' must hold 2 numbers");
    const auto values = choice.defined() ? choice.to(at::kCPU, at::kLong) : at::full({2}, -1, at::kLong);
    return {values[0].item<int64_t>(), values[1].item<int64_t>()};
  }

 private:
  std::vector<std::map<std::string, at::Tensor>> saved_;
};

}  // namespace

std::vector<std::vector<int64_t>> Engine::own_block_numbers() const {
  const auto numbers = blocking::parameter_block_numbers(whole_plan_);
  const bool split = splits_blocks(distributed_.get());
  const auto origin = distributed::rank_origin(whole_plan_,
      distributed::split_work(whole_plan_, split ? distributed_->world_size() : 1), split ? distributed_->rank() : 0);
  std::vector<std::vector<int64_t>> own(origin.stacks.size());
  for (size_t s = 0; s < origin.stacks.size(); ++s) {
    for (const auto block : origin.blocks[s]) own[s].push_back(numbers[origin.stacks[s]][block]);
  }
  return own;
}

ParameterState Engine::parameter_state(
    size_t index, const std::vector<torch::optim::OptimizerParamGroup>& groups) const {
  TORCH_CHECK(index < params_.size(), "dash::Dash::parameter_state: parameter ", index, " of ", params_.size());
  const auto param = static_cast<int64_t>(index);
  ParameterState entries;
  auto add = [&](const std::string& name, const at::Tensor& tensor) {
    if (tensor.defined()) entries.emplace_back(name, tensor);
  };
  auto row = [](const at::Tensor& tensor, int64_t i) { return tensor.defined() ? tensor.select(0, i) : tensor; };
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    for (int64_t i = 0; i < stack.count(); ++i) {
      if (stack.block_params[i] != param) continue;
      const auto prefix = block_prefix(block_numbers_[s][i]);
      for (const auto& [name, tensor] : moment_fields(stacks_[s].moments)) add(prefix + name, row(*tensor, i));
      const auto sides = factor_sides(stack);
      for (size_t side = 0; side < sides.size(); ++side) {
        const auto k = sides[side].first;
        const auto& factor = factors_[k];
        const auto r = sides[side].second + i;
        const std::string suffix = kSides[side];
        add(prefix + "factor_" + suffix, factor.factors.select(0, r));
        add(prefix + "root_" + suffix, factor.roots.select(0, r));
        // What the first root computation allocates is shown from the start (as the
        // zeros it allocates): torch.distributed.checkpoint loads only the names its
        // target, a fresh optimizer's state dict, already holds.
        add(prefix + "consecutive_failures_" + suffix, optional_row(factor, OptionalRow::ConsecutiveFailures, r));
        if (factor.basis.vectors.defined() || may_warm_start(options_of(groups[plan_.factor_stacks[k].group]))) {
          add(prefix + "eigenvectors_" + suffix, optional_row(factor, OptionalRow::Eigenvectors, r));
          add(prefix + "eigenbasis_valid_" + suffix, optional_row(factor, OptionalRow::EigenbasisValid, r));
        }
        add(prefix + "root_choice_" + suffix,
            at::tensor(
                {static_cast<int64_t>(factor.root_execution), static_cast<int64_t>(factor.root_method)}, at::kLong));
      }
    }
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    if (std::find(segment.params.begin(), segment.params.end(), param) == segment.params.end()) continue;
    const auto& slot = plan_.parameters[index];
    for (const auto& [name, tensor] : moment_fields(segments_[j].moments)) {
      if (tensor->defined())
        add(name, tensor->narrow(2, slot.offset - segment.offset, slot.numel).view(params_[index].sizes()));
    }
  }
  return entries;
}

void Engine::load_parameter_states(const std::vector<ParameterState>& states, const StepCounts& counts) {
  TORCH_INTERNAL_ASSERT(steps_taken_ == 0, "Engine::load_parameter_states: into a fresh engine only");
  TORCH_CHECK(states.size() == params_.size(), "dash::Dash: the state is for ", states.size(),
      " parameters, this optimizer has ", params_.size());
  const SavedEntries saved(states, blocking::blocks_per_parameter(whole_plan_));
  std::vector<std::set<int64_t>> executions(factors_.size()), methods(factors_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    const auto sides = factor_sides(stack);
    for (int64_t i = 0; i < stack.count(); ++i) {
      const auto param = static_cast<size_t>(stack.block_params[i]);
      const auto prefix = block_prefix(block_numbers_[s][i]);
      saved.copy_moments(stacks_[s].moments, param, prefix, [&](const at::Tensor& t) { return t.select(0, i); });
      for (size_t side = 0; side < sides.size(); ++side) {
        const auto k = sides[side].first;
        const auto choice = saved.copy_factor_row(factors_[k], sides[side].second + i, param, prefix, kSides[side]);
        executions[k].insert(choice.first);
        methods[k].insert(choice.second);
      }
    }
    // The host's step counts, which schedule the roots, are the saved ones.
    const auto steps = stacks_[s].moments.steps.reshape({-1}).to(at::kCPU, at::kDouble).contiguous();
    for (int64_t i = 0; i < stack.count(); ++i) stacks_[s].steps[i] = std::llround(steps.data_ptr<double>()[i]);
  }
  for (size_t k = 0; k < factors_.size(); ++k) settle_loaded_stack(factors_[k], executions[k], methods[k]);
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    for (const auto param : segment.params) {
      const auto& slot = plan_.parameters[param];
      saved.copy_moments(segments_[j].moments, static_cast<size_t>(param), "", [&](const at::Tensor& t) {
        return t.narrow(2, slot.offset - segment.offset, slot.numel).view(params_[param].sizes());
      });
    }
  }
  steps_taken_ = counts.steps_taken;
  skipped_steps_ = counts.skipped_steps;
  overflow_skipped_steps_ = counts.overflow_skipped_steps;
}

}  // namespace dash::optim
