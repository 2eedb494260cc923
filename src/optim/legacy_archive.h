#pragma once

// The one reader of the checkpoint format dash wrote until 2026-12-07 (format 1:
// the state as stacks, "stack.<s>.*", "factor.<k>.*" and "segment.<j>.*", each
// rank's archive its share of the blocks). It turns such archives into the state
// keyed by parameter, which then loads as every checkpoint does
// (Engine::load_parameter_states). Nothing writes format 1 any more.

#include <dash/optimizer.h>

#include "blocking/stack_plan.h"

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace torch::serialize {
class InputArchive;
}  // namespace torch::serialize

namespace dash::optim {

/// One rank's archive: written by rank `rank` of `world` ranks, whose ranks split
/// the blocks (`split`; ranks of local shards each held their own parameters'
/// state, as one process).
struct LegacyShard {
  torch::serialize::InputArchive* archive = nullptr;
  int64_t rank = 0;
  int64_t world = 1;
  bool split = true;
};

struct LegacyState {
  std::vector<ParameterState> states;  ///< per parameter: the entries of the shards' blocks
  StepCounts counts;                   ///< the first shard's
};

/// The entries the shards hold, for the parameters of `groups` (with the
/// checkpoint's options) planned as `whole` with `blocking`. Each shard's signature
/// must be the one its rank wrote for these parameters and options; throws, naming
/// the shard, where it is not, or where the shards were written at different steps.
/// The per-stack diagnostics counters of format 1 (failures, resets, refresh counts)
/// are not carried over: a load restarts them.
LegacyState read_legacy_shards(const std::vector<LegacyShard>& shards, const blocking::StackPlan& whole,
    const std::vector<blocking::GroupBlocking>& blocking, const std::vector<torch::optim::OptimizerParamGroup>& groups);

}  // namespace dash::optim
