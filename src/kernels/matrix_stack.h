#pragma once

// A CPU stack of matrices as the split loops read it (stack_blas.cpp,
// stack_reductions.cpp): its base pointer and strides, taken on the caller's
// thread before the split (in LibTorch ≥ 2.3 data_ptr() may copy a copy-on-write
// storage, which must not happen in several helper threads at once). And whether
// a loop may write a tensor at all (stack_select.cpp, matrix_transfer.cpp).

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace dash::kernels {

template <typename Scalar>
struct MatrixStack {
  Scalar* data;
  int64_t stride;  // between matrices
  int64_t ld;      // between rows

  Scalar* matrix(int64_t index) const { return data + index * stride; }
};

/// Whether no two elements of `t` share memory, as a loop that writes it must know:
/// with its dimensions ordered by stride, each steps past all that the ones inside
/// it span. (Sufficient, and true of every stack and block region dash writes.)
inline bool without_self_overlap(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> steps;  // (stride, size) of dimensions longer than 1
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) steps.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(steps.begin(), steps.end());
  int64_t span = 1;
  for (const auto& [stride, size] : steps) {
    if (stride < span) return false;
    span += (size - 1) * stride;
  }
  return true;
}

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

}  // namespace dash::kernels
