#include "kernels/stack_select.h"

#include "kernels/matrix_stack.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <vector>

namespace dash::kernels {
namespace {

void check_stack_and_mask(const at::Tensor& dst, const at::Tensor& mask, const char* function) {
  TORCH_CHECK(dst.dim() == 3, "dash: ", function, ": expected an (N, b, b) stack, got ", dst.sizes());
  TORCH_CHECK(mask.scalar_type() == at::kBool && mask.numel() == dst.size(0) && mask.device() == dst.device(),
      "dash: ", function, ": expected an (N,) bool mask on ", dst.device(), " for a stack of ", dst.size(0),
      " matrices, got ", mask.sizes(), " (", mask.scalar_type(), ", ", mask.device(), ")");
}

// Whether each matrix of `t` is one block of memory (its rows contiguous, no gap
// between them), so that it copies as one memcpy.
bool contiguous_matrices(const at::Tensor& t) {
  return t.layout() == at::kStrided && (t.size(2) <= 1 || t.stride(2) == 1) &&
         (t.size(1) <= 1 || t.stride(1) == t.size(2));
}

// A destination whose matrices do not overlap (an expanded one would be written
// twice over; ATen's where_out refuses it with its own message).
bool separate_matrices(const at::Tensor& t) { return contiguous_matrices(t) && without_self_overlap(t); }

// The mask on the host: a CPU tensor's own memory, no device transfer.
std::vector<uint8_t> host_mask(const at::Tensor& mask) {
  auto flat = mask.reshape({-1}).contiguous();
  const auto* values = flat.data_ptr<bool>();
  return std::vector<uint8_t>(values, values + flat.numel());
}

}  // namespace

void copy_matrices_where(const at::Tensor& dst, const at::Tensor& mask, const at::Tensor& src) {
  check_stack_and_mask(dst, mask, "copy_matrices_where");
  TORCH_CHECK(src.sizes() == dst.sizes() && src.scalar_type() == dst.scalar_type() && src.device() == dst.device(),
      "dash: copy_matrices_where: expected a source like the destination ", dst.sizes(), " (", dst.scalar_type(),
      "), got ", src.sizes(), " (", src.scalar_type(), ", ", src.device(), ")");
  if (!dst.is_cpu() || !separate_matrices(dst) || !contiguous_matrices(src) || dst.is_alias_of(src)) {
    auto out = dst;
    at::where_out(out, mask.view({-1, 1, 1}), src, dst);
    return;
  }
  const auto chosen = host_mask(mask);
  const auto matrix_bytes = static_cast<size_t>(dst.size(1) * dst.size(2)) * dst.element_size();
  // Pointers read on the caller's thread (copy-on-write storages, stack_blas.cpp).
  auto* to = static_cast<char*>(dst.data_ptr());
  const auto* from = static_cast<const char*>(src.data_ptr());
  const auto to_stride = static_cast<size_t>(dst.stride(0)) * dst.element_size();
  const auto from_stride = static_cast<size_t>(src.stride(0)) * src.element_size();
  for_each_pass_range(
      dst, 2.0 * static_cast<double>(dst.numel() * dst.element_size()), [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) {
          if (chosen[static_cast<size_t>(i)]) std::memcpy(to + i * to_stride, from + i * from_stride, matrix_bytes);
        }
      });
}

void fill_matrices_where(const at::Tensor& dst, const at::Tensor& mask, double value) {
  check_stack_and_mask(dst, mask, "fill_matrices_where");
  if (!dst.is_cpu()) {
    auto out = dst;
    out.masked_fill_(mask.view({-1, 1, 1}), value);
    return;
  }
  // Nearly always none: a factor that overflowed, a root that failed.
  const auto chosen = host_mask(mask);
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i]) dst.select(0, static_cast<int64_t>(i)).fill_(value);
  }
}

}  // namespace dash::kernels
