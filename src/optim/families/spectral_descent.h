#pragma once

// Spectral descent as a preconditioner family (PreconditionerType::SpectralDescent):
// Muon's update on each block, U = NS(Ĝ) · max(1, rows/cols)^½, where NS is the
// quintic Newton–Schulz orthogonalisation of linalg/newton_schulz.h, run for
// newton_schulz_steps in preconditioning_precision. The family keeps no state: Muon's
// momentum is the engine's gradient EMA Ĝ (β_G = beta_grad; nesterov_grad gives
// Muon's Nesterov form, bias_correction off gives its uncorrected buffer), so a
// block's entries are the engine's moments alone. Muon itself orthogonalises each
// matrix whole: with block_size at least the largest dimension dash does the same,
// with one batched call per shape instead of one per matrix.

#include "optim/preconditioner.h"

#include <memory>

namespace dash::optim {

std::unique_ptr<Preconditioner> make_spectral_descent(const blocking::StackPlan& plan);

}  // namespace dash::optim
