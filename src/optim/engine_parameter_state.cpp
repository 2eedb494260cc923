// The state keyed by parameter, under names that do not depend on the world size:
// each block's state as "block.<j>.<name>", j the block's number among its
// parameter's blocks in the whole plan (blocking::parameter_block_numbers), the
// engine's fields (moment_fields) and its family's (the family's field table); an
// AdamW parameter's moments in the parameter's own shape. A rank holds the entries
// of the blocks it owns, so the union of every rank's entries is the whole state,
// and any world size finds its blocks' entries in it (torch.distributed.checkpoint
// saves each entry once and loads each where it is asked for). Every checkpoint
// goes through here.

#include "optim/engine.h"

#include <dash/distributed.h>

#include "distributed/work_split.h"
#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/saved_entries.h"
#include "optim/state_fields.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace dash::optim {
namespace {

std::vector<std::string> moment_names() {
  std::vector<std::string> names;
  for (const auto& field : moment_fields) names.emplace_back(field.name);
  return names;
}

// Moments: each one `into` keeps is required, and none it does not keep may be
// given. `part` gives a moment's part that holds the parameter's (or block's).
template <typename Part>
void load_moments(
    const MomentState& into, const SavedEntries& saved, size_t param, const std::string& prefix, Part&& part) {
  for (const auto& field : moment_fields) {
    const auto& tensor = into.*field.tensor;
    const auto name = prefix + field.name;
    if (tensor.defined()) {
      copy_entry(part(tensor), saved.required(param, name), field.values, SavedEntries::what(param, name));
    } else {
      TORCH_CHECK(!saved.find(param, name).defined(), "dash::Dash: parameter ", param, "'s state has '", name,
          "', which these options do not keep (saved with other options?)");
    }
  }
}

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
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    for (int64_t i = 0; i < stack.count(); ++i) {
      if (stack.block_params[i] != param) continue;
      const auto prefix = block_prefix(block_numbers_[s][i]);
      for (const auto& field : moment_fields) {
        const auto& tensor = stacks_[s].moments.*field.tensor;
        if (tensor.defined()) entries.emplace_back(prefix + field.name, tensor.select(0, i));
      }
      family_of(s).block_entries(s, i, prefix, options_of(groups[stack.group]), entries);
    }
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    if (std::find(segment.params.begin(), segment.params.end(), param) == segment.params.end()) continue;
    const auto& slot = plan_.parameters[index];
    for (const auto& field : moment_fields) {
      const auto& tensor = segments_[j].moments.*field.tensor;
      if (tensor.defined()) {
        entries.emplace_back(
            field.name, tensor.narrow(2, slot.offset - segment.offset, slot.numel).view(params_[index].sizes()));
      }
    }
  }
  return entries;
}

void Engine::load_parameter_states(const std::vector<ParameterState>& states, const StepCounts& counts) {
  TORCH_INTERNAL_ASSERT(steps_taken_ == 0, "Engine::load_parameter_states: into a fresh engine only");
  TORCH_CHECK(states.size() == params_.size(), "dash::Dash: the state is for ", states.size(),
      " parameters, this optimizer has ", params_.size());
  for (const auto& [name, count] :
      {std::pair{"steps_taken", counts.steps_taken}, std::pair{"skipped_steps", counts.skipped_steps},
          std::pair{"overflow_skipped_steps", counts.overflow_skipped_steps}}) {
    TORCH_CHECK(count >= 0, "dash::Dash: the state's ", name, " is ", count, " (a count is never negative)");
  }
  const auto group_of = [&](size_t param) { return plan_.parameters[param].group; };
  const SavedEntries saved(
      states, blocking::blocks_per_parameter(whole_plan_),
      [&](size_t param, const std::string& field) {
        const auto names = moment_names();
        return std::find(names.begin(), names.end(), field) != names.end() ||
               families_[family_of_group_[group_of(param)]]->is_block_field(field);
      },
      moment_names());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    for (int64_t i = 0; i < stack.count(); ++i) {
      const auto param = static_cast<size_t>(stack.block_params[i]);
      const auto prefix = block_prefix(block_numbers_[s][i]);
      load_moments(stacks_[s].moments, saved, param, prefix, [&](const at::Tensor& t) { return t.select(0, i); });
      family_of(s).load_block_entries(s, i, param, prefix, saved);
    }
    // The host's step counts, which schedule t_start and the amortised work, are the saved ones.
    const auto steps = stacks_[s].moments.steps.reshape({-1}).to(at::kCPU, at::kDouble).contiguous();
    for (int64_t i = 0; i < stack.count(); ++i) host_steps_[s][i] = std::llround(steps.data_ptr<double>()[i]);
  }
  for (auto& family : families_) family->finish_loading();
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto& segment = plan_.adamw_segments[j];
    for (const auto param : segment.params) {
      const auto& slot = plan_.parameters[param];
      load_moments(segments_[j].moments, saved, static_cast<size_t>(param), "", [&](const at::Tensor& t) {
        return t.narrow(2, slot.offset - segment.offset, slot.numel).view(params_[param].sizes());
      });
    }
  }
  steps_taken_ = counts.steps_taken;
  skipped_steps_ = counts.skipped_steps;
  overflow_skipped_steps_ = counts.overflow_skipped_steps;
}

}  // namespace dash::optim
