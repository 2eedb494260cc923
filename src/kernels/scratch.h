#pragma once

// Reusable memory for the solvers' stack-sized temporaries. A Newton or Clenshaw
// iteration makes a few new (N, b, b) iterates per step; allocated afresh, each is
// a fresh set of pages on a CPU (glibc hands blocks this large back to the kernel
// on free) and a trip through the caching allocator on a GPU. Taken from a
// Scratch that lives across calls, the iteration allocates nothing after its
// first call.
//
// A buffer is free when no tensor other than the Scratch refers to its storage,
// so a solver just lets an iterate go out of scope (or overwrites it) to return
// its buffer; no explicit release, and a tensor a caller still holds is never
// handed out again.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <vector>

namespace dash::kernels {

class Scratch {
 public:
  /// An uninitialised tensor of `sizes` and `options` (dtype, device), contiguous,
  /// in a buffer nothing else uses now. Reuses the smallest free buffer of that
  /// dtype and device that is large enough; otherwise replaces a free one that is
  /// too small, or adds a buffer.
  at::Tensor empty(at::IntArrayRef sizes, const at::TensorOptions& options);
  at::Tensor empty_like(const at::Tensor& like) { return empty(like.sizes(), like.options()); }

  /// Bytes held, free or not.
  int64_t bytes() const;
  /// Buffers held, free or not.
  size_t buffers() const { return buffers_.size(); }

 private:
  std::vector<at::Tensor> buffers_;  // flat, one per buffer
};

}  // namespace dash::kernels
