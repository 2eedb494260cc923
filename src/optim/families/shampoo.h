#pragma once

// Root-inverse Shampoo as a preconditioner family (spec §4; PreconditionerType::
// Shampoo): per block the factors L ← β L + (1 − β) G Gᵀ and R ← β R + (1 − β) Gᵀ G
// (R only for a matrix block), their inverse roots L̄ = L^(-1/p), R̄ = R^(-1/p)
// recomputed every root_frequency steps from start_step on by every solver of
// <dash/inverse_root.h> (shampoo_roots.h), and U = L̄ Ĝ R̄. The factors of one size
// in a group form one factor stack, whichever gradient stacks they come from, so
// that a root computation is one batched call per size.

#include "optim/preconditioner.h"

#include <memory>

namespace dash::optim {

std::unique_ptr<Preconditioner> make_shampoo(const blocking::StackPlan& plan,
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to);

}  // namespace dash::optim
