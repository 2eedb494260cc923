#pragma once

// Root-inverse Shampoo's per-block arithmetic (spec §4 steps 3 and 7), on a run of
// blocks given as stacked tensors: the factor updates and the preconditioned
// direction U = L̄ Ĝ R̄. Pure functions of tensors.

#include "optim/block_state.h"

#include <ATen/core/Tensor.h>

namespace dash::optim {

/// L ← β L + (1 − β) G Gᵀ (left) or R ← β R + (1 − β) Gᵀ G, in place; β = 1 adds.
/// The factor must be symmetric: on a CPU only its lower triangle may be read
/// (kernels::stack_syrk), and the result is then exactly symmetric.
void accumulate_factor(at::Tensor& factor, const at::Tensor& grad, bool left, double beta);

/// U = L̄ Ĝ R̄ (R̄ undefined: one-sided, U = L̄ Ĝ) from Ĝ in work.ghat. Roots in a
/// 16-bit dtype make the products 16-bit ones (DashOptions::
/// preconditioning_precision): Ĝ is rounded into work.ghat_operand, each product is
/// rounded too, and U is widened into work.direction, so U is float32 either way.
/// Uses work.product and work.direction (and the operand buffers); returns one of them.
at::Tensor shampoo_direction(Workspace& work, const at::Tensor& left_root, const at::Tensor& right_root);

}  // namespace dash::optim
