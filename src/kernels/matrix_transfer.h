#pragma once

// Moving blocks between parameters and stacks (spec §3, §4 step 9) in one pass
// over the cores. A step reads every gradient into its stack and subtracts every
// update from its parameter: one strided view per block region, so one ATen op
// per region, each on one core (ATen's intra-op pool has one thread under
// Debian's LibTorch) and most of them too small to split on their own. On a CPU
// these are one list of matrices instead, split over the cores as any
// memory-bound pass (for_each_pass_range): the same values, no ATen op per region
// (docs/experiments/2026-12-05-memory-passes.md, "Gradients in and updates out over the cores").

#include <ATen/core/Tensor.h>

#include <vector>

namespace dash::kernels {

/// What a transfer does with each destination element d and its source s.
enum class Transfer {
  Copy,      ///< d ← s
  Subtract,  ///< d ← c·d − s, with the pair's `destination_scale` c (weight decay)
};

/// A destination view and its source, of equal shapes (any strides).
struct ViewPair {
  at::Tensor destination;
  at::Tensor source;
  double destination_scale = 1.0;  ///< Subtract's c; 1 for Copy
};

/// Applies `transfer` to every pair, as destination.copy_(source) or
/// destination.mul_(c).sub_(source) would (c = 1: no multiplication; a source of
/// another dtype converted to the destination's first, as copy_ does): each
/// product and difference rounded once. The destinations must be disjoint, and no
/// pair may read what another writes: the pairs run in no particular order.
/// On a CPU, pairs of plain tensors of one floating dtype (Subtract: float32 or
/// float64) and one shape, whose rows are contiguous and whose destinations overlap
/// neither themselves nor their sources' storage, go through dash's loop over the
/// cores, which bumps each destination's version counter as an in-place op does;
/// any other pair (and any write autograd would record) is one ATen op.
void transfer_matrices(const std::vector<ViewPair>& pairs, Transfer transfer);

}  // namespace dash::kernels
