#pragma once

// What a chunk of a gradient stack holds per block in the step's statistics update
// and direction phases, for the workspace budget (workspace_budget.h) to size
// chunks by.

#include <dash/optimizer_options.h>

#include "blocking/stack_plan.h"
#include "optim/block_state.h"
#include "optim/preconditioner.h"

#include <cstdint>

namespace dash::optim {

/// Bytes per block of a chunk of `stack` (whose moments are `moments`), in the
/// statistics update or the direction, whichever is more: the gathered gradient, Ĝ
/// and P_g; in 16-bit preconditioning two rounded operands; bfloat16 moments
/// widened; without `stack_complete` (a chunk may be a scattered subset, taken by
/// copies: chunk_rows) the blocks' moments; and what the family needs on top in
/// each phase (`family`: Shampoo's factors or roots as operands, widened, copied).
int64_t gradient_chunk_bytes_per_block(const blocking::GradientStack& stack, const DashOptions& options,
    const MomentState& moments, bool stack_complete, const ChunkBytes& family);

}  // namespace dash::optim
