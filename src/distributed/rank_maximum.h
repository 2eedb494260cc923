#pragma once

// What the ranks of a distributed optimizer decide alike (skip, raise, stop on root
// failures): each from the maximum over the ranks of what each rank sees.

#include <dash/distributed.h>

#include <ATen/core/Tensor.h>

namespace dash::distributed {

/// Makes `values` (contiguous float32, on the ranks' device) their element-wise
/// maximum over the ranks of `context`, NaN counting as +∞ (so that a rank that saw
/// a NaN decides every rank): one all-reduce in place, nothing allocated. Throws,
/// naming the collective, when it fails.
void take_maximum_over_ranks(const DistributedContext& context, at::Tensor& values);

}  // namespace dash::distributed
