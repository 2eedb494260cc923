#pragma once

// Filling a freshly built engine's state row by row from saved state, for the two
// readers that take it block by block (a checkpoint written on another world size,
// engine_reshard.cpp; a state keyed by parameter, engine_parameter_state.cpp).

#include "optim/block_update.h"
#include "optim/root_refresh.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <set>
#include <string>
#include <utility>

namespace dash::optim {

/// The moments' tensors under their saved names, in checkpoint order.
template <typename Moments>
auto moment_fields(Moments& moments) {
  return std::array{std::pair{"grad_ema", &moments.grad_ema}, std::pair{"graft_stat", &moments.graft_stat},
      std::pair{"momentum", &moments.momentum}, std::pair{"step", &moments.steps}};
}

/// The rows of a factor stack's state that a fresh engine allocates only at the
/// stack's first root computation, as zeros: each factor's root failures in a row
/// (int64), and, with a warm-started EVD, its eigenvectors (float32 (b, b)) and
/// whether they are valid (bool).
enum class OptionalRow { ConsecutiveFailures, Eigenvectors, EigenbasisValid };

/// Row `row` of `state`'s `which`, or, where it is not allocated yet, what it would
/// be then: zeros (no failures; no valid eigenbasis, which a root computation treats
/// as none).
at::Tensor optional_row(const FactorStackState& state, OptionalRow which, int64_t row);

/// Row `row` of `into`'s `which` from `saved_row`, where the saved state has it,
/// allocating the whole tensor (zeros) first where `into` has none. Throws, naming
/// `what`, when `saved_row` is not of the row's shape and dtype.
void copy_optional_row(
    FactorStackState& into, OptionalRow which, int64_t row, const at::Tensor& saved_row, const std::string& what);

/// After every row of a factor stack was copied: the per-stack counters restart
/// from zero (they are diagnostics, and a saved stack may now be split over
/// several), allocated with the state they count; Execution::Auto's and
/// RootMethod::Auto's choices are kept where all the rows' sources made the same one
/// (`executions`, `methods`: the choices seen, −1 for none saved), else made again.
/// Throws on a choice that names no method.
void settle_loaded_stack(FactorStackState& into, const std::set<int64_t>& executions, const std::set<int64_t>& methods);

}  // namespace dash::optim
