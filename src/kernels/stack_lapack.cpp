#include "kernels/stack_lapack.h"

#include "kernels/core_ranges.h"

#include <ATen/ATen.h>

namespace dash::kernels {
namespace {

// `factorise(first, second, input)`, an ATen out= routine with two outputs, on
// every range of the stack, into the ranges of `first` and `second`.
template <typename Factorise>
void factorise_ranges(const at::Tensor& stack, const at::Tensor& first, const at::Tensor& second, Factorise factorise) {
  for_each_stack_range(stack, [&](int64_t begin, int64_t end) {
    auto first_range = first.slice(0, begin, end);
    auto second_range = second.slice(0, begin, end);
    factorise(first_range, second_range, stack.slice(0, begin, end));
  });
}

}  // namespace

at::Tensor stack_eigh(const at::Tensor& stack, const at::Tensor& vectors) {
  auto values = at::empty({stack.size(0), stack.size(-1)}, stack.options());
  factorise_ranges(
      stack, values, vectors, [](at::Tensor& range_values, at::Tensor& range_vectors, const at::Tensor& range) {
        at::linalg_eigh_out(range_values, range_vectors, range);
      });
  return values;
}

at::Tensor column_major_view(const at::Tensor& buffer) { return buffer.transpose(-2, -1); }

std::tuple<at::Tensor, at::Tensor> stack_qr(const at::Tensor& stack) {
  // Both column-major, as LAPACK writes them: no temporaries, no copies.
  auto q = column_major_view(at::empty_like(stack, at::MemoryFormat::Contiguous));
  auto r = column_major_view(at::empty_like(stack, at::MemoryFormat::Contiguous));
  factorise_ranges(stack, q, r, [](at::Tensor& range_q, at::Tensor& range_r, const at::Tensor& range) {
    at::linalg_qr_out(range_q, range_r, range);
  });
  return {q, r};
}

}  // namespace dash::kernels
