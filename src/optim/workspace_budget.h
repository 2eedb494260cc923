#pragma once

// How a step's workspace is shared out under DashOptions::workspace_limit (pure
// arithmetic on byte counts; the engine says what each phase needs per block or
// factor). Half the limit goes to the root solvers' workspace and half to the
// blocks' buffers (gathered gradients, Ĝ, P_g, 16-bit operands): both are kept
// across steps, so that a step allocates nothing once they hold their chunks. The
// buffers that are not divided into chunks (the 1-D parameters' AdamW buffers, a
// distributed rank's exchange buffers) come on top.

#include <dash/optimizer_options.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dash::optim {

struct WorkspaceBudget {
  int64_t limit = 0;  ///< bytes; 0: no limit
  bool bounded() const { return limit > 0; }
  /// The root solvers' share and the blocks' buffers' (each half the limit, at
  /// least a byte: a chunk of one); 0 without a limit.
  int64_t roots() const { return bounded() ? std::max<int64_t>(1, limit / 2) : 0; }
  int64_t blocks() const { return roots(); }
};

/// The budget `workspace_limit` stands for with `state_bytes` of optimizer state:
/// a fraction of the state in (0, 1), at least kWorkspaceFloorBytes; bytes from 1
/// on; no limit at 0.
WorkspaceBudget workspace_budget(double workspace_limit, int64_t state_bytes);

/// The budget of several groups' limits: the largest (no limit where any has none).
WorkspaceBudget largest_budget(const std::vector<WorkspaceBudget>& budgets);

/// Items (blocks or factors) per chunk: the most whose `bytes_per_item` each, on
/// top of `fixed_bytes`, fit in `budget_bytes`; at least 1 (a chunk holds one item
/// whatever it needs) and at most `count`; `count` when budget_bytes is 0 (no limit).
int64_t items_per_chunk(int64_t count, int64_t bytes_per_item, int64_t fixed_bytes, int64_t budget_bytes);

/// `items` cut into consecutive runs of at most `size` (the last may be shorter).
std::vector<std::vector<int64_t>> split_into_chunks(const std::vector<int64_t>& items, int64_t size);

}  // namespace dash::optim
