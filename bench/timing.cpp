#include "timing.h"

#include "common/device_clock.h"
#include "kernels/stack_blas.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace dash::bench {

TimingSummary time_it(const std::function<at::Tensor()>& work, int warmup, int repetitions) {
  for (int i = 0; i < warmup; ++i) {
    common::wait_for_device(work());
  }
  std::vector<double> times;
  for (int i = 0; i < std::max(repetitions, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    common::wait_for_device(work());
    times.push_back(common::milliseconds_since(start));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), times.back()};
}

at::ScalarType matmul_dtype(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::FP16:
      return at::kHalf;
    case MatmulPrecision::BF16:
      return at::kBFloat16;
    case MatmulPrecision::FP32:
      break;
  }
  return at::kFloat;
}

double bmm_gflops(int64_t count, int64_t b, at::ScalarType dtype, const at::Device& device, int warmup, int repetitions,
    std::string* measured_dtype) {
  auto x = at::randn({count, b, b}, at::TensorOptions().device(device));
  try {
    (void)at::bmm(x.to(dtype), x.to(dtype));
  } catch (const c10::Error&) {
    dtype = at::kFloat;
  }
  if (measured_dtype) *measured_dtype = c10::toString(dtype);
  auto a = x.to(dtype);
  auto y = x.transpose(1, 2).contiguous().to(dtype);
  // Into a preallocated output: the ceiling is the matmul, not the allocator (a
  // fresh CPU output this size is fresh pages every call). A 16-bit one on a CPU as
  // dash multiplies 16-bit stacks, over the cores (kernels::stack_bmm_out): one
  // at::bmm_out runs on ATen's pool, which may have fewer threads than the CPU cores.
  auto out = at::empty_like(a);
  const bool sixteen_bit = dtype == at::kHalf || dtype == at::kBFloat16;
  auto timing = time_it(
      [&] { return sixteen_bit ? kernels::stack_bmm_out(out, a, y) : at::bmm_out(out, a, y); }, warmup, repetitions);
  // The best of the repetitions: a ceiling, which a noisy machine only lowers.
  return 2.0 * static_cast<double>(count * b * b * b) / (timing.min_ms * 1e6);
}

std::string lapack_plan_description(const at::Device& device) {
  // A stack as large as any: the plan's worker count is then the BLAS's thread count.
  return kernels::stack_lapack_plan(/*matrices=*/1 << 20, device).description;
}

std::string solver_products_description(const at::Device& device) {
  return kernels::stack_symmetric_product_plan(device).description;
}

std::string set_float32_matmul_mode(bool allow_tf32) {
  at::globalContext().setFloat32MatmulPrecision(allow_tf32 ? "high" : "highest");
  return allow_tf32 ? "TF32 allowed (float32 matmul precision 'high')" : "IEEE float32";
}

}  // namespace dash::bench
