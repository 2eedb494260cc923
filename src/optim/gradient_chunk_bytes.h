#pragma once

// What a chunk of a gradient stack holds per block in the step's factor update and
// direction phases, for the workspace budget (workspace_budget.h) to size chunks by.

#include <dash/optimizer_options.h>

#include "blocking/stack_plan.h"
#include "optim/block_update.h"

#include <cstdint>

namespace dash::optim {

/// Bytes per block of a chunk of `stack` (whose moments are `moments`), in the
/// factor update or the direction, whichever is more: the gathered gradient, Ĝ and
/// P_g; in 16-bit preconditioning two rounded operands; the chunk's roots as
/// operands where the stored ones are not (rounded to 16 bits, or bfloat16 roots
/// widened); bfloat16 moments and factors widened; with `mixed_start` (some blocks
/// not yet past t_start) their direction beside the others' (at::where); and
/// without `stack_complete` (a scattered subset, taken by copies) the blocks'
/// moments and their factors or roots.
int64_t gradient_chunk_bytes_per_block(const blocking::GradientStack& stack, const DashOptions& options,
    const MomentState& moments, bool stack_complete, bool mixed_start);

}  // namespace dash::optim
