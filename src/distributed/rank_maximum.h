#pragma once

// What the ranks of a distributed optimizer decide alike (skip, raise, stop on root
// failures): each from the maximum over the ranks of what each rank sees.

#include <dash/distributed.h>

#include <ATen/core/Tensor.h>

namespace dash::distributed {

/// The element-wise maximum of `values` over the ranks of `context`, NaN counting
/// as +∞ (so that a rank that saw a NaN decides every rank): one all-reduce of a
/// float32 copy, on `values`' device. Throws, naming the collective, when it fails.
at::Tensor maximum_over_ranks(const DistributedContext& context, const at::Tensor& values);

}  // namespace dash::distributed
