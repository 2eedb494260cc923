#pragma once

// Masks and indices decided on the host (which blocks are due, active, past
// t_start), sent to the device.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dash::optim {

/// `host` (a CPU tensor) on `device`. To a CUDA device through pinned memory, so that
/// the copy is queued rather than waited for: a copy from pageable memory
/// synchronises the stream with the host first. (The caching host allocator keeps
/// the pinned block until the copy has run.)
inline at::Tensor host_to_device(const at::Tensor& host, const at::Device& device) {
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

/// `values` as an (N,) bool tensor on `device` (through bytes: std::vector<bool>
/// has no contiguous storage).
inline at::Tensor bool_mask(const std::vector<bool>& values, const at::Device& device) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return host_to_device(at::tensor(bytes, at::kByte), device).to(at::kBool);
}

/// `values` as an (N,) int64 tensor on `device`.
inline at::Tensor index_tensor(const std::vector<int64_t>& values, const at::Device& device) {
  return host_to_device(at::tensor(values, at::kLong), device);
}

}  // namespace dash::optim
