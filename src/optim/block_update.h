#pragma once

// The engine's per-block arithmetic of one DASH step (spec §4), the same for every
// preconditioner family, on a run of blocks given as stacked tensors: Ĝ and the
// grafting direction (steps 5–6), the family's direction rescaled to the
// grafting's norm (step 7's rescale), and momentum (step 8). The batched execution
// passes whole stacks, the sequential one single-block slices: both run exactly
// this code. A family's own arithmetic is in src/optim/families/.

#include "optim/block_state.h"

#include <ATen/core/Tensor.h>

namespace dash::optim {

/// Updates M and A in place and writes Ĝ (the bias-corrected gradient EMA) into
/// work.ghat and the grafting direction P_g (grafting.h) into work.graft.
void grafting_direction(const at::Tensor& grad, MomentState& state, const StepHyper& hyper, Workspace& work);

/// A family's direction U (in work.product or work.direction) rescaled per block to
/// the norm of P_g when the grafting rescales (all but None): P = U ‖P_g‖_F /
/// (‖U‖_F + 1e-16); times `scale` (the step passes lr when nothing comes between P
/// and the update). In place; returns U's tensor.
at::Tensor grafted(Workspace& work, at::Tensor u, GraftingType grafting, double scale = 1.0);

/// Heavy-ball or Nesterov momentum on the direction (spec §4 step 8); updates B_m.
at::Tensor apply_momentum(const at::Tensor& direction, MomentState& state, const StepHyper& hyper);

}  // namespace dash::optim
