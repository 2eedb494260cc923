// Reading a checkpoint on another world size: the state of every block and AdamW
// segment is per block (or per segment), so a rank of the reading run takes each of
// its blocks' state from the shard of the rank that owned the block when the
// checkpoint was written. Which rank that was is a pure function of the plan and the
// old world size (distributed/work_split.h), so no index needs to be saved.

#include "optim/engine.h"

#include <dash/distributed.h>

#include "distributed/work_split.h"
#include "optim/distributor.h"
#include "optim/state_rows.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace dash::optim {
namespace {

constexpr const char* kMomentNames[] = {".grad_ema", ".graft_stat", ".momentum", ".steps"};
constexpr const char* kFactorNames[] = {
    ".factors", ".roots", ".consecutive_failures", ".eigenvectors", ".eigenbasis_valid"};

// One rank of a world (the writing or the reading one): its plan and where its
// stacks and segments come from in the whole plan.
struct RankPart {
  blocking::StackPlan plan;
  distributed::RankOrigin origin;
};

RankPart rank_part(const blocking::StackPlan& whole, const std::vector<blocking::GroupBlocking>& blocking, int64_t rank,
    int64_t world_size) {
  const auto split = distributed::split_work(whole, world_size);
  if (world_size == 1) return {whole, distributed::rank_origin(whole, split, 0)};
  return {distributed::plan_for_rank(whole, split, rank, blocking), distributed::rank_origin(whole, split, rank)};
}

// A shard as read: its rank's part, its state tensors by checkpoint key (undefined
// where it has none), its host step counts (its stacks' blocks end to end) and each
// factor stack's choices of Execution::Auto and RootMethod::Auto (−1: none saved).
struct Shard {
  int64_t rank = 0;
  RankPart part;
  std::map<std::string, at::Tensor> tensors;
  std::vector<int64_t> host_steps;
  std::map<std::string, int64_t> choices;

  const at::Tensor& required(const std::string& key) const {
    const auto found = tensors.find(key);
    TORCH_CHECK(found != tensors.end() && found->second.defined(), "dash::Dash: the checkpoint shard of rank ", rank,
        " has no '", key, "'");
    return found->second;
  }
  int64_t choice(const std::string& key) const {
    const auto found = choices.find(key);
    return found == choices.end() ? -1 : found->second;
  }
};

at::Tensor read_optional(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor tensor;
  return archive.try_read(key, tensor, /*is_buffer=*/true) ? tensor : at::Tensor();
}

// The state of the shard's stacks, factor stacks and segments (its counters are the
// engine's to read).
void read_state(torch::serialize::InputArchive& archive, Shard& shard) {
  const auto& plan = shard.part.plan;
  for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
    const auto prefix = "stack." + std::to_string(s);
    const auto steps = read_optional(archive, prefix + ".host_steps");
    TORCH_CHECK(steps.defined() && steps.numel() == plan.gradient_stacks[s].count(),
        "dash::Dash: the checkpoint "
        "shard of rank ",
        shard.rank, " has no step counts for stack ", s);
    const auto values = steps.to(at::kLong).contiguous();
    shard.host_steps.insert(
        shard.host_steps.end(), values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
    for (const char* name : kMomentNames) shard.tensors[prefix + name] = read_optional(archive, prefix + name);
  }
  for (size_t k = 0; k < plan.factor_stacks.size(); ++k) {
    const auto prefix = "factor." + std::to_string(k);
    for (const char* name : kFactorNames) shard.tensors[prefix + name] = read_optional(archive, prefix + name);
    for (const char* name : {".root_execution", ".root_method"}) {
      c10::IValue value;
      if (archive.try_read(prefix + name, value)) shard.choices[prefix + name] = value.toInt();
    }
  }
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    const auto prefix = "segment." + std::to_string(j);
    for (const char* name : kMomentNames) shard.tensors[prefix + name] = read_optional(archive, prefix + name);
  }
}

// Where each block ((stack, block) of the whole plan) and each AdamW segment was:
// (shard, its stack or segment, its block).
struct Homes {
  std::map<std::pair<int64_t, int64_t>, std::tuple<size_t, size_t, int64_t>> blocks;
  std::map<int64_t, std::pair<size_t, size_t>> segments;
};

Homes homes_of(const std::vector<Shard>& shards) {
  Homes homes;
  for (size_t r = 0; r < shards.size(); ++r) {
    const auto& origin = shards[r].part.origin;
    for (size_t s = 0; s < origin.stacks.size(); ++s) {
      for (size_t i = 0; i < origin.blocks[s].size(); ++i) {
        homes.blocks[{origin.stacks[s], origin.blocks[s][i]}] = {r, s, static_cast<int64_t>(i)};
      }
    }
    for (size_t j = 0; j < origin.segments.size(); ++j) homes.segments[origin.segments[j]] = {r, j};
  }
  return homes;
}

// Factor `row` of `into` from factor `from_row` of the shard's factor stack `old_k`.
void copy_factor(FactorStackState& into, int64_t row, const Shard& shard, int64_t old_k, int64_t from_row) {
  const auto prefix = "factor." + std::to_string(old_k);
  into.factors.select(0, row).copy_(shard.required(prefix + ".factors").select(0, from_row));
  into.roots.select(0, row).copy_(shard.required(prefix + ".roots").select(0, from_row));
  auto copy_row = [&](OptionalRow which, const char* name) {
    const auto& saved = shard.tensors.at(prefix + name);
    copy_optional_row(into, which, row, saved.defined() ? saved.select(0, from_row) : saved, prefix + name);
  };
  copy_row(OptionalRow::ConsecutiveFailures, ".consecutive_failures");
  copy_row(OptionalRow::Eigenvectors, ".eigenvectors");
  copy_row(OptionalRow::EigenbasisValid, ".eigenbasis_valid");
}

// The moments of block `row` (all of them for −1) from the shard's `prefix` stack or
// segment, its block `from_row` (all for −1).
void copy_moments(MomentState& into, int64_t row, const Shard& shard, const std::string& prefix, int64_t from_row) {
  const std::pair<at::Tensor*, const char*> moments[] = {{&into.grad_ema, ".grad_ema"},
      {&into.graft_stat, ".graft_stat"}, {&into.momentum, ".momentum"}, {&into.steps, ".steps"}};
  for (const auto& [tensor, name] : moments) {
    if (!tensor->defined()) continue;
    const auto& saved = shard.required(prefix + name);
    if (row < 0) {
      tensor->copy_(saved);
    } else {
      tensor->select(0, row).copy_(saved.select(0, from_row));
    }
  }
}

// The choices of Execution::Auto and RootMethod::Auto that the sources of a factor
// stack's rows saved (−1: none).
std::pair<std::set<int64_t>, std::set<int64_t>> saved_choices(
    const std::set<std::pair<size_t, int64_t>>& sources, const std::vector<Shard>& shards) {
  std::set<int64_t> executions, methods;
  for (const auto& [r, old_k] : sources) {
    executions.insert(shards[r].choice("factor." + std::to_string(old_k) + ".root_execution"));
    methods.insert(shards[r].choice("factor." + std::to_string(old_k) + ".root_method"));
  }
  return {executions, methods};
}

// The layout check and counters of shard r of `old_world`: its signature must be
// `expected` (or, written by a single process, `expected_single` where not empty).
StepCounts read_shard_counts(torch::serialize::InputArchive& archive, int64_t r, int64_t old_world,
    const std::string& expected, const std::string& expected_single) {
  c10::IValue layout;
  archive.read("dash.layout", layout);
  TORCH_CHECK(layout.toStringRef() == expected || (!expected_single.empty() && layout.toStringRef() == expected_single),
      "dash::Dash: checkpoint shard ", r, " of ", old_world, " was not saved by rank ", r, " of ", old_world,
      " for these parameters and options.\nshard:\n", layout.toStringRef(), "\nexpected:\n", expected);
  StepCounts counts;
  c10::IValue value;
  archive.read("dash.steps_taken", value);
  counts.steps_taken = value.toInt();
  archive.read("dash.skipped_steps", value);
  counts.skipped_steps = value.toInt();
  if (archive.try_read("dash.overflow_skipped_steps", value)) counts.overflow_skipped_steps = value.toInt();
  return counts;
}

// Block `row` of a stack of this engine (`stack`, its state `state`), whose home is
// block old_i of stack old_s of `shard`: its moments, host step count and factor
// rows; notes in `factor_sources` which of the shard's factor stacks they came from.
void copy_block(GradientStackState& state, std::vector<FactorStackState>& factors, const blocking::GradientStack& stack,
    int64_t row, const Shard& shard, size_t old_s, int64_t old_i,
    std::vector<std::set<std::pair<size_t, int64_t>>>& factor_sources) {
  const auto& old_plan = shard.part.plan;
  copy_moments(state.moments, row, shard, "stack." + std::to_string(old_s), old_i);
  int64_t first_of_stack = 0;  // the stack's first block in the shard's host step counts
  for (size_t t = 0; t < old_s; ++t) first_of_stack += old_plan.gradient_stacks[t].count();
  state.steps[row] = shard.host_steps.at(static_cast<size_t>(first_of_stack + old_i));
  const auto& old_stack = old_plan.gradient_stacks[old_s];
  const auto r = static_cast<size_t>(shard.rank);
  copy_factor(
      factors[stack.left_stack], stack.left_offset + row, shard, old_stack.left_stack, old_stack.left_offset + old_i);
  factor_sources[stack.left_stack].insert({r, old_stack.left_stack});
  if (stack.one_sided) return;
  copy_factor(factors[stack.right_stack], stack.right_offset + row, shard, old_stack.right_stack,
      old_stack.right_offset + old_i);
  factor_sources[stack.right_stack].insert({r, old_stack.right_stack});
}

}  // namespace

// Each shard's layout is checked against the one its rank would have now (same
// parameters and options), then every block and segment of this engine is copied
// from its home shard.
void Engine::load_resharded(std::vector<torch::serialize::InputArchive>& archives,
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  TORCH_INTERNAL_ASSERT(steps_taken_ == 0, "Engine::load_resharded: into a fresh engine only");
  TORCH_CHECK(!archives.empty(), "dash::Dash: no checkpoint shards to load");
  TORCH_CHECK(!distributed_ || distributed_->world_size() == 1 || splits_blocks(distributed_.get()),
      "dash::Dash: ranks of local shards (DistributionScheme::LocalShards) hold the state of parameters of their own; "
      "each loads its own checkpoint (load(), on the same ranks and shards)");
  const auto old_world = static_cast<int64_t>(archives.size());
  std::vector<Shard> shards(archives.size());
  for (int64_t r = 0; r < old_world; ++r) {
    auto& shard = shards[r];
    shard.rank = r;
    shard.part = rank_part(whole_plan_, blocking_, r, old_world);
    const auto stacks = shard.part.plan.gradient_stacks.size(), factors = shard.part.plan.factor_stacks.size();
    const auto counts = read_shard_counts(archives[r], r, old_world,
        layout_signature_of(groups, stacks, factors, std::pair(r, old_world)),
        old_world == 1 ? layout_signature_of(groups, stacks, factors, {}) : std::string());
    TORCH_CHECK(r == 0 || counts.steps_taken == steps_taken_,
        "dash::Dash: checkpoint shards of different steps (rank 0 at ", steps_taken_, ", rank ", r, " at ",
        counts.steps_taken, ")");
    if (r == 0) {
      steps_taken_ = counts.steps_taken;
      skipped_steps_ = counts.skipped_steps;
      overflow_skipped_steps_ = counts.overflow_skipped_steps;
    }
    read_state(archives[r], shard);
  }
  const auto homes = homes_of(shards);
  const auto own = rank_part(
      whole_plan_, blocking_, distributed_ ? distributed_->rank() : 0, distributed_ ? distributed_->world_size() : 1);
  std::vector<std::set<std::pair<size_t, int64_t>>> factor_sources(factors_.size());
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    for (size_t i = 0; i < own.origin.blocks[s].size(); ++i) {
      const auto [r, old_s, old_i] = homes.blocks.at({own.origin.stacks[s], own.origin.blocks[s][i]});
      copy_block(stacks_[s], factors_, stack, static_cast<int64_t>(i), shards[r], old_s, old_i, factor_sources);
    }
  }
  for (size_t k = 0; k < factors_.size(); ++k) {
    const auto [executions, methods] = saved_choices(factor_sources[k], shards);
    settle_loaded_stack(factors_[k], executions, methods);
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto [r, old_j] = homes.segments.at(own.origin.segments[j]);
    copy_moments(segments_[j].moments, -1, shards[r], "segment." + std::to_string(old_j), -1);
  }
}

}  // namespace dash::optim
