#pragma once

// Wall-clock timing of device work, for the one-off calibrations (Execution::Auto,
// RootMethod::Auto): the host clock sees a CUDA kernel finished only once a value
// it wrote has been read back. Not for a per-step path: the read is a host sync.

#include <ATen/core/Tensor.h>

#include <chrono>

namespace dash::common {

/// Returns once the device has finished writing `tensor` (reads one value back; a
/// no-op on the CPU and for undefined or empty tensors).
inline void wait_for_device(const at::Tensor& tensor) {
  if (tensor.defined() && !tensor.is_cpu() && tensor.numel() > 0) (void)tensor.flatten()[0].item<double>();
}

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dash::common
