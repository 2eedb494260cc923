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
/// widened); bfloat16 moments and factors widened; and without `stack_complete` (a
/// chunk may be a scattered subset, taken by copies: chunk_rows) the blocks'
/// moments and their factors or roots.
int64_t gradient_chunk_bytes_per_block(
    const blocking::GradientStack& stack, const DashOptions& options, const MomentState& moments, bool stack_complete);

}  // namespace dash::optim
