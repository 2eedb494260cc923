#pragma once

// Filling a freshly built engine's state row by row from saved state, for the two
// readers that take it block by block (a checkpoint written on another world size,
// engine_reshard.cpp; a state keyed by parameter, engine_parameter_state.cpp).

#include "optim/block_update.h"
#include "optim/root_refresh.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <set>
#include <utility>

namespace dash::optim {

/// The moments' tensors under their saved names, in checkpoint order.
template <typename Moments>
auto moment_fields(Moments& moments) {
  return std::array{std::pair{"grad_ema", &moments.grad_ema}, std::pair{"graft_stat", &moments.graft_stat},
      std::pair{"momentum", &moments.momentum}, std::pair{"step", &moments.steps}};
}

/// Row `row` of `into` from `saved_row`, where the saved state has it: state that a
/// fresh engine allocates only on first use (a factor's failures in a row, a warm
/// eigenbasis) is allocated as zeros of `shape` on `device` then.
void copy_optional_row(
    at::Tensor& into, at::IntArrayRef shape, int64_t row, const at::Tensor& saved_row, const at::Device& device);

/// After every row of a factor stack was copied: the per-stack counters restart
/// from zero (they are diagnostics, and a saved stack may now be split over
/// several), allocated with the state they count; Execution::Auto's and
/// RootMethod::Auto's choices are kept where all the rows' sources made the same one
/// (`executions`, `methods`: the choices seen, −1 for none saved), else made again.
/// Throws on a choice that names no method.
void settle_loaded_stack(FactorStackState& into, const std::set<int64_t>& executions, const std::set<int64_t>& methods);

}  // namespace dash::optim
