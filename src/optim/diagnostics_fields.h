#pragma once

// Every field of DashDiagnostics and of the per-stack structs it holds, as X-macro
// lists FIELD(name, type) in declaration order: the one list the Python
// diagnostics dict (src/python/optimizer_binding.cpp) is generated from, checked
// against the structs by size below (a field missing from a list stops the build,
// unless it fits into padding).

#include <dash/optimizer.h>

// clang-format off
#define DASH_FACTOR_STACK_DIAGNOSTICS(FIELD)                                      \
  FIELD(group, int64_t) FIELD(size, int64_t) FIELD(count, int64_t)                \
  FIELD(root, int64_t) FIELD(failures, int64_t) FIELD(execution, Execution)       \
  FIELD(calibrated_batched_ms, double) FIELD(calibrated_per_block_ms, double)     \
  FIELD(root_method, RootMethod) FIELD(newton_db_evaluation, NewtonDBEvaluation)  \
  FIELD(root_method_trials, std::vector<RootMethodTrial>)                         \
  FIELD(roots_kept, int64_t) FIELD(roots_warm_started, int64_t)                   \
  FIELD(roots_recomputed, int64_t) FIELD(factor_resets, int64_t)
#define DASH_BLOCK_STACK_DIAGNOSTICS(FIELD)                                       \
  FIELD(group, int64_t) FIELD(rows, int64_t) FIELD(cols, int64_t)                 \
  FIELD(count, int64_t) FIELD(one_sided, bool)
// DashDiagnostics' scalars (its two lists of stacks are handled by each user).
#define DASH_DIAGNOSTICS(FIELD)                                                   \
  FIELD(skipped_steps, int64_t) FIELD(state_bytes, int64_t)                       \
  FIELD(workspace_bytes, int64_t) FIELD(unchunked_workspace_bytes, int64_t)       \
  FIELD(workspace_limit_bytes, int64_t) FIELD(step_peak_bytes, int64_t)           \
  FIELD(steps_taken, int64_t) FIELD(overflow_skipped_steps, int64_t)
// clang-format on

namespace dash::optim::diagnostics_fields {

#define DASH_MIRROR_MEMBER(name, type) type name;
struct FactorStackFields {
  DASH_FACTOR_STACK_DIAGNOSTICS(DASH_MIRROR_MEMBER)
};
struct BlockStackFields {
  DASH_BLOCK_STACK_DIAGNOSTICS(DASH_MIRROR_MEMBER)
};
struct DiagnosticsFields {
  std::vector<FactorStackDiagnostics> factor_stacks;
  std::vector<BlockStackDiagnostics> block_stacks;
  DASH_DIAGNOSTICS(DASH_MIRROR_MEMBER)
};
#undef DASH_MIRROR_MEMBER
static_assert(sizeof(FactorStackFields) == sizeof(FactorStackDiagnostics),
    "DASH_FACTOR_STACK_DIAGNOSTICS must list every FactorStackDiagnostics field");
static_assert(sizeof(BlockStackFields) == sizeof(BlockStackDiagnostics),
    "DASH_BLOCK_STACK_DIAGNOSTICS must list every BlockStackDiagnostics field");
static_assert(
    sizeof(DiagnosticsFields) == sizeof(DashDiagnostics), "DASH_DIAGNOSTICS must list every DashDiagnostics field");

}  // namespace dash::optim::diagnostics_fields
