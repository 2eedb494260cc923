// Reading a checkpoint on another world size: the state of every block and AdamW
// segment is per block (or per segment), so a rank of the reading run takes each of
// its blocks' state from the shard of the rank that owned the block when the
// checkpoint was written. Which rank that was is a pure function of the plan and the
// old world size (distributed/work_split.h), so no index needs to be saved.

#include "optim/engine.h"

#include <dash/distributed.h>

#include "distributed/work_split.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace dash::optim {
namespace {

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

// A shard's tensors by key (those it holds).
using ShardTensors = std::map<std::string, at::Tensor>;

at::Tensor read_optional(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor tensor;
  return archive.try_read(key, tensor, /*is_buffer=*/true) ? tensor : at::Tensor();
}

const at::Tensor& required(const ShardTensors& tensors, const std::string& key, int64_t rank) {
  const auto found = tensors.find(key);
  TORCH_CHECK(found != tensors.end() && found->second.defined(), "dash::Dash: the checkpoint shard of rank ", rank,
      " has no '", key, "'");
  return found->second;
}

}  // namespace

void Engine::load_resharded(
    std::vector<torch::serialize::InputArchive>& shards, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  TORCH_INTERNAL_ASSERT(steps_taken_ == 0, "Engine::load_resharded: into a fresh engine only");
  TORCH_CHECK(!shards.empty(), "dash::Dash: no checkpoint shards to load");
  const auto old_world = static_cast<int64_t>(shards.size());
  const int64_t rank = distributed_ ? distributed_->rank() : 0;
  const int64_t world = distributed_ ? distributed_->world_size() : 1;
  const auto own = rank_part(whole_plan_, blocking_, rank, world);

  // Every shard: its layout, its counters and its tensors.
  std::vector<RankPart> old_parts;
  std::vector<ShardTensors> tensors(shards.size());
  std::vector<std::vector<int64_t>> host_steps(shards.size());
  for (int64_t r = 0; r < old_world; ++r) {
    auto& archive = shards[r];
    old_parts.push_back(rank_part(whole_plan_, blocking_, r, old_world));
    const auto& plan = old_parts.back().plan;
    c10::IValue layout;
    archive.read("dash.layout", layout);
    const auto base = layout_signature_of(groups, plan.gradient_stacks.size(), plan.factor_stacks.size(), {});
    const auto ranked =
        layout_signature_of(groups, plan.gradient_stacks.size(), plan.factor_stacks.size(), std::pair(r, old_world));
    TORCH_CHECK(layout.toStringRef() == ranked || (old_world == 1 && layout.toStringRef() == base),
        "dash::Dash: checkpoint shard ", r, " of ", old_world, " was not saved by rank ", r, " of ", old_world,
        " for these parameters and options.\nshard:\n", layout.toStringRef(), "\nexpected:\n", ranked);
    c10::IValue value;
    archive.read("dash.steps_taken", value);
    if (r == 0) {
      steps_taken_ = value.toInt();
      archive.read("dash.skipped_steps", value);
      skipped_steps_ = value.toInt();
      if (archive.try_read("dash.overflow_skipped_steps", value)) overflow_skipped_steps_ = value.toInt();
    } else {
      TORCH_CHECK(value.toInt() == steps_taken_, "dash::Dash: checkpoint shards of different steps (rank 0 at ",
          steps_taken_, ", rank ", r, " at ", value.toInt(), ")");
    }
    for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
      const auto prefix = "stack." + std::to_string(s);
      const auto steps = read_optional(archive, prefix + ".host_steps").to(at::kLong).contiguous();
      host_steps[r].insert(host_steps[r].end(), steps.data_ptr<int64_t>(), steps.data_ptr<int64_t>() + steps.numel());
      for (const char* name : {".grad_ema", ".graft_stat", ".momentum", ".steps"}) {
        tensors[r][prefix + name] = read_optional(archive, prefix + name);
      }
    }
    for (size_t k = 0; k < plan.factor_stacks.size(); ++k) {
      const auto prefix = "factor." + std::to_string(k);
      for (const char* name : {".factors", ".roots", ".consecutive_failures", ".eigenvectors", ".eigenbasis_valid"}) {
        tensors[r][prefix + name] = read_optional(archive, prefix + name);
      }
      c10::IValue choice;
      if (archive.try_read(prefix + ".root_execution", choice))
        tensors[r][prefix + ".root_execution"] = at::tensor(choice.toInt(), at::kLong);
      if (archive.try_read(prefix + ".root_method", choice))
        tensors[r][prefix + ".root_method"] = at::tensor(choice.toInt(), at::kLong);
    }
    for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
      const auto prefix = "segment." + std::to_string(j);
      for (const char* name : {".grad_ema", ".graft_stat", ".momentum", ".steps"}) {
        tensors[r][prefix + name] = read_optional(archive, prefix + name);
      }
    }
  }

  // Where each block and segment of the whole plan was: (rank, its stack, its block).
  std::map<std::pair<int64_t, int64_t>, std::tuple<int64_t, size_t, int64_t>> block_home;
  std::map<int64_t, std::pair<int64_t, size_t>> segment_home;
  for (int64_t r = 0; r < old_world; ++r) {
    const auto& origin = old_parts[r].origin;
    for (size_t s = 0; s < origin.stacks.size(); ++s) {
      for (size_t i = 0; i < origin.blocks[s].size(); ++i) {
        block_home[{origin.stacks[s], origin.blocks[s][i]}] = {r, s, static_cast<int64_t>(i)};
      }
    }
    for (size_t j = 0; j < origin.segments.size(); ++j) segment_home[origin.segments[j]] = {r, j};
  }

  // Per factor stack of this engine: the old stacks its factors came from, for the
  // choices made per stack (kept where they all agree).
  std::vector<std::set<std::pair<int64_t, int64_t>>> factor_sources(factors_.size());
  const auto device = params_.front().device();
  auto copy_row = [&](at::Tensor& into, int64_t row, const at::Tensor& from, int64_t from_row, const at::Tensor& like) {
    if (!from.defined()) return;
    if (!into.defined()) into = at::zeros_like(like.defined() ? like : from.to(device));
    into.select(0, row).copy_(from.select(0, from_row));
  };
  for (size_t s = 0; s < stacks_.size(); ++s) {
    const auto& stack = plan_.gradient_stacks[s];
    auto& state = stacks_[s];
    for (size_t i = 0; i < own.origin.blocks[s].size(); ++i) {
      const auto [r, old_s, old_i] = block_home.at({own.origin.stacks[s], own.origin.blocks[s][i]});
      const auto prefix = "stack." + std::to_string(old_s);
      const auto& from = tensors[r];
      const auto row = static_cast<int64_t>(i);
      for (auto [name, tensor] :
          {std::pair{".grad_ema", &state.moments.grad_ema}, std::pair{".graft_stat", &state.moments.graft_stat},
              std::pair{".momentum", &state.moments.momentum}, std::pair{".steps", &state.moments.steps}}) {
        if (tensor->defined()) tensor->select(0, row).copy_(required(from, prefix + name, r).select(0, old_i));
      }
      const auto& old_stack = old_parts[r].plan.gradient_stacks[old_s];
      size_t block_in_old_plan = 0;  // the block's place in the shard's host step counts
      for (size_t t = 0; t < old_s; ++t) block_in_old_plan += old_parts[r].plan.gradient_stacks[t].count();
      state.steps[i] = host_steps[r].at(block_in_old_plan + static_cast<size_t>(old_i));
      auto side = [&](int64_t k, int64_t offset, int64_t old_k, int64_t old_offset) {
        auto& factor = factors_[k];
        const auto old_prefix = "factor." + std::to_string(old_k);
        const auto to = offset + row, from_row = old_offset + old_i;
        factor.factors.select(0, to).copy_(required(from, old_prefix + ".factors", r).select(0, from_row));
        factor.roots.select(0, to).copy_(required(from, old_prefix + ".roots", r).select(0, from_row));
        const auto& failures = from.at(old_prefix + ".consecutive_failures");
        if (failures.defined() && !factor.consecutive_failures.defined()) {
          factor.consecutive_failures = at::zeros({plan_.factor_stacks[k].count}, failures.options().device(device));
        }
        copy_row(factor.consecutive_failures, to, failures, from_row, factor.consecutive_failures);
        const auto& vectors = from.at(old_prefix + ".eigenvectors");
        if (vectors.defined() && !factor.basis.vectors.defined()) factor.basis.vectors = at::zeros_like(factor.factors);
        copy_row(factor.basis.vectors, to, vectors, from_row, factor.basis.vectors);
        const auto& valid = from.at(old_prefix + ".eigenbasis_valid");
        if (valid.defined() && !factor.basis.valid.defined()) {
          factor.basis.valid = at::zeros({plan_.factor_stacks[k].count}, valid.options().device(device));
        }
        copy_row(factor.basis.valid, to, valid, from_row, factor.basis.valid);
        factor_sources[k].insert({r, old_k});
      };
      side(stack.left_stack, stack.left_offset, old_stack.left_stack, old_stack.left_offset);
      if (!stack.one_sided) side(stack.right_stack, stack.right_offset, old_stack.right_stack, old_stack.right_offset);
    }
  }
  // The per-stack counters restart from zero (they are diagnostics, and an old stack
  // may now be split over several), allocated with the state they count.
  for (auto& factor : factors_) {
    const auto counter = at::TensorOptions().dtype(at::kLong).device(device);
    if (factor.consecutive_failures.defined() && !factor.factor_resets.defined()) {
      factor.factor_resets = at::zeros({}, counter);
    }
    if (factor.basis.vectors.defined() && !factor.refresh_counts.defined())
      factor.refresh_counts = at::zeros({3}, counter);
  }
  // Execution::Auto's and RootMethod::Auto's choices where every source stack made
  // the same one (else they are made again).
  auto choice = [&](const std::pair<int64_t, int64_t>& source, const char* name) {
    const auto& saved = tensors[source.first]["factor." + std::to_string(source.second) + name];
    return saved.defined() ? saved.item<int64_t>() : int64_t{-1};
  };
  for (size_t k = 0; k < factors_.size(); ++k) {
    std::set<int64_t> executions, methods;
    for (const auto& source : factor_sources[k]) {
      executions.insert(choice(source, ".root_execution"));
      methods.insert(choice(source, ".root_method"));
    }
    if (executions.size() == 1 && *executions.begin() >= 0) {
      factors_[k].root_execution = static_cast<Execution>(*executions.begin());
      factors_[k].calibration_pending = factors_[k].root_execution == Execution::Auto;
    }
    if (methods.size() == 1 && *methods.begin() >= 0)
      factors_[k].root_method = static_cast<RootMethod>(*methods.begin());
  }
  for (size_t j = 0; j < segments_.size(); ++j) {
    const auto [r, old_j] = segment_home.at(own.origin.segments[j]);
    const auto prefix = "segment." + std::to_string(old_j);
    auto& moments = segments_[j].moments;
    for (auto [name, tensor] :
        {std::pair{".grad_ema", &moments.grad_ema}, std::pair{".graft_stat", &moments.graft_stat},
            std::pair{".momentum", &moments.momentum}, std::pair{".steps", &moments.steps}}) {
      if (tensor->defined()) tensor->copy_(required(tensors[r], prefix + name, r));
    }
  }
}

}  // namespace dash::optim
