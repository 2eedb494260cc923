#pragma once

// A CPU stack of matrices as the split loops read it (stack_blas.cpp,
// stack_reductions.cpp): its base pointer and strides, taken on the caller's thread
// before the split. In LibTorch ≥ 2.3 data_ptr() may copy a copy-on-write storage,
// which must not happen in several helper threads at once.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dash::linalg {

template <typename Scalar>
struct MatrixStack {
  Scalar* data;
  int64_t stride;  // between matrices
  int64_t ld;      // between rows

  Scalar* matrix(int64_t index) const { return data + index * stride; }
};

/// An (N, rows, cols) stack with unit column stride, to write.
template <typename Scalar>
MatrixStack<Scalar> writable_view(const at::Tensor& t) {
  return {t.data_ptr<Scalar>(), t.stride(0), t.stride(1)};
}

/// The same, to read.
template <typename Scalar>
MatrixStack<const Scalar> readable_view(const at::Tensor& t) {
  return {t.data_ptr<Scalar>(), t.stride(0), t.stride(1)};
}

}  // namespace dash::linalg
