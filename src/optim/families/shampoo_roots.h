#pragma once

// Root-inverse Shampoo's amortised work, the per-factor-stack root policy (spec §4
// step 4): which method (RootMethod::Auto's one-off choice), warm eigenbases or
// not, batched or one block at a time
// (Execution::Auto's one-off timing), over chunks that fit the workspace limit, with
// failed roots kept and counted and overflowing factors restarted. The engine says
// which factors are due; this unit owns everything after that.

#include <dash/optimizer.h>
#include <dash/root_method_choice.h>

#include "blocking/stack_plan.h"
#include "kernels/scratch.h"
#include "optim/families/shampoo_state.h"
#include "optim/workspace_budget.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace dash::optim {

/// The engine's buffers a root computation uses, shared by all factor stacks (one
/// chunk is solved at a time): the solvers' workspace, the blocks' scratch (free in
/// this phase; bfloat16 factors are widened there), and the count of factor resets
/// over all stacks.
struct RootBuffers {
  InverseRootWorkspace& solvers;
  kernels::Scratch& scratch;
  at::Tensor& factor_resets_total;
};

/// New roots for the factors of `state` (stack `stack`, options `options`) that are
/// `due` (one flag per factor, at least one set). A root that comes out non-finite
/// or far above its bound, or a solver that throws, keeps the previous root and
/// counts a failure; no host sync, except the one-off choices of RootMethod::Auto and
/// Execution::Auto.
void refresh_roots(const blocking::FactorStack& stack, const DashOptions& options, const WorkspaceBudget& budget,
    const std::vector<bool>& due, FactorStackState& state, RootBuffers& buffers);

/// Factors per root computation: the whole stack without a limit, else as many as
/// the solver's temporaries for them (and bfloat16 state's widened factors and
/// rounded roots) fit the roots' share of the workspace, and on a CPU that splits a
/// stack's eigh over its cores a multiple of their number.
int64_t factors_per_chunk(const blocking::FactorStack& stack, const FactorStackState& state,
    const InverseRootOptions& root_options, bool warm_basis, const WorkspaceBudget& budget);

}  // namespace dash::optim
