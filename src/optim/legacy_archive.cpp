#include "optim/legacy_archive.h"

#include "distributed/work_split.h"
#include "optim/dash_options.h"
#include "optim/saved_entries.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <string>
#include <utility>

namespace dash::optim {
namespace {

// Format 1's names of a block's moments ("stack.<s>" + name) and a factor's rows
// ("factor.<k>" + name), with the entries they are now.
constexpr std::pair<const char*, const char*> kMoments[] = {
    {".grad_ema", "grad_ema"}, {".graft_stat", "graft_stat"}, {".momentum", "momentum"}, {".steps", "step"}};
constexpr std::pair<const char*, const char*> kFactorRows[] = {{".factors", "factor_"}, {".roots", "root_"},
    {".consecutive_failures", "consecutive_failures_"}, {".eigenvectors", "eigenvectors_"},
    {".eigenbasis_valid", "eigenbasis_valid_"}};

at::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor tensor;
  return archive.try_read(key, tensor, /*is_buffer=*/true) ? tensor : at::Tensor();
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key, int64_t fallback) {
  c10::IValue value;
  return archive.try_read(key, value) ? value.toInt() : fallback;
}

// One shard's rank part: its plan and where its stacks come from in the whole plan.
struct Part {
  blocking::StackPlan plan;
  distributed::RankOrigin origin;
};

Part part_of(
    const LegacyShard& shard, const blocking::StackPlan& whole, const std::vector<blocking::GroupBlocking>& blocking) {
  const auto world = shard.split ? shard.world : 1;
  const auto split = distributed::split_work(whole, world);
  const auto rank = shard.split ? shard.rank : 0;
  return {world == 1 ? whole : distributed::plan_for_rank(whole, split, rank, blocking),
      distributed::rank_origin(whole, split, rank)};
}

// Format 1's signature ("dash.layout") of the shard's part: the groups' state-shaping
// options and shapes, the part's stack counts and, where the optimizer had a
// distributed context, its rank (a single process: none; a context of one rank
// wrote "rank 0 of 1", so either is its).
void check_signature(torch::serialize::InputArchive& archive, const LegacyShard& shard, const Part& part,
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  const auto base = groups_signature(groups, true, /*before_families=*/true) + "stacks " +
                    std::to_string(part.plan.gradient_stacks.size()) + " factors " +
                    std::to_string(part.plan.factor_stacks.size());
  const auto ranked = base + "\nrank " + std::to_string(shard.rank) + " of " + std::to_string(shard.world);
  c10::IValue layout;
  archive.read("dash.layout", layout);
  const auto& saved = layout.toStringRef();
  TORCH_CHECK(saved == ranked || (shard.world == 1 && saved == base), "dash::Dash: checkpoint shard ", shard.rank,
      " of ", shard.world, " was not saved by rank ", shard.rank, " of ", shard.world,
      " for these parameters and options.\nshard:\n", saved, "\nexpected:\n", ranked);
}

// The shard's blocks' entries into `states`: moments, each side's factor rows and
// the stack's choices.
void read_blocks(torch::serialize::InputArchive& archive, const Part& part,
    const std::vector<std::vector<int64_t>>& numbers, std::vector<ParameterState>& states) {
  for (size_t s = 0; s < part.plan.gradient_stacks.size(); ++s) {
    const auto& stack = part.plan.gradient_stacks[s];
    std::vector<std::pair<std::string, at::Tensor>> moments;
    for (const auto& [key, name] : kMoments)
      moments.emplace_back(name, read_tensor(archive, "stack." + std::to_string(s) + key));
    for (int64_t i = 0; i < stack.count(); ++i) {
      auto& entries = states[stack.block_params[i]];
      const auto prefix = block_prefix(numbers[part.origin.stacks[s]][part.origin.blocks[s][i]]);
      for (const auto& [name, tensor] : moments) {
        if (tensor.defined()) entries.emplace_back(prefix + name, tensor.select(0, i));
      }
      const std::pair<int64_t, int64_t> sides[] = {
          {stack.left_stack, stack.left_offset}, {stack.right_stack, stack.right_offset}};
      for (size_t side = 0; side < (stack.one_sided ? 1 : 2); ++side) {
        const auto factor = "factor." + std::to_string(sides[side].first);
        const std::string suffix = side == 0 ? "left" : "right";
        for (const auto& [key, name] : kFactorRows) {
          const auto rows = read_tensor(archive, factor + key);
          if (rows.defined()) entries.emplace_back(prefix + name + suffix, rows.select(0, sides[side].second + i));
        }
        entries.emplace_back(prefix + "root_choice_" + suffix,
            at::tensor(
                {read_int(archive, factor + ".root_execution", -1), read_int(archive, factor + ".root_method", -1)},
                at::kLong));
      }
    }
  }
}

// The shard's AdamW segments' moments, per parameter in its own shape.
void read_segments(torch::serialize::InputArchive& archive, const Part& part, const std::vector<at::Tensor>& params,
    std::vector<ParameterState>& states) {
  for (size_t j = 0; j < part.plan.adamw_segments.size(); ++j) {
    const auto& segment = part.plan.adamw_segments[j];
    for (const auto& [key, name] : kMoments) {
      const auto moment = read_tensor(archive, "segment." + std::to_string(j) + key);
      if (!moment.defined()) continue;
      for (const auto param : segment.params) {
        const auto& slot = part.plan.parameters[param];
        states[param].emplace_back(
            name, moment.narrow(-1, slot.offset - segment.offset, slot.numel).view(params[param].sizes()));
      }
    }
  }
}

}  // namespace

LegacyState read_legacy_shards(const std::vector<LegacyShard>& shards, const blocking::StackPlan& whole,
    const std::vector<blocking::GroupBlocking>& blocking,
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::vector<at::Tensor> params;
  for (const auto& group : groups) params.insert(params.end(), group.params().begin(), group.params().end());
  const auto numbers = blocking::parameter_block_numbers(whole);
  LegacyState result;
  result.states.resize(params.size());
  for (size_t r = 0; r < shards.size(); ++r) {
    auto& archive = *shards[r].archive;
    const auto part = part_of(shards[r], whole, blocking);
    check_signature(archive, shards[r], part, groups);
    const StepCounts counts{read_int(archive, "dash.steps_taken", 0), read_int(archive, "dash.skipped_steps", 0),
        read_int(archive, "dash.overflow_skipped_steps", 0)};
    TORCH_CHECK(r == 0 || counts.steps_taken == result.counts.steps_taken,
        "dash::Dash: checkpoint shards of different steps (rank 0 at ", result.counts.steps_taken, ", rank ",
        shards[r].rank, " at ", counts.steps_taken, ")");
    if (r == 0) result.counts = counts;
    read_blocks(archive, part, numbers, result.states);
    read_segments(archive, part, params, result.states);
  }
  return result;
}

}  // namespace dash::optim
