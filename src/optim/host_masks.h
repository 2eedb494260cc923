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

/// `values` as an (N,) tensor on `device`, in `kept` (grown when it is too small or
/// elsewhere): after the first steps, sending allocates nothing on the device. A
/// copy (through pinned memory to a CUDA device) is queued before the function
/// returns, so `values` may go. The result is a view of `kept`: it holds until the
/// next call with that buffer, whose copy the stream orders after the work queued
/// on it before (one stream per optimizer, as for every buffer kept across steps).
template <typename T>
at::Tensor values_into(at::Tensor& kept, const std::vector<T>& values, const at::Device& device) {
  const auto dtype = c10::CppTypeToScalarType<T>::value;
  const auto count = static_cast<int64_t>(values.size());
  if (!kept.defined() || kept.numel() < count || kept.device() != device || kept.scalar_type() != dtype) {
    kept = at::empty({count}, at::TensorOptions(device).dtype(dtype));
  }
  const auto host = at::from_blob(const_cast<T*>(values.data()), {count}, dtype);
  auto out = kept.narrow(0, 0, count);
  if (device.is_cuda()) {
    out.copy_(host.pin_memory(), /*non_blocking=*/true);
  } else {
    out.copy_(host);
  }
  return out;
}

/// `values` as an (N,) int64 tensor on `device`.
inline at::Tensor index_tensor(const std::vector<int64_t>& values, const at::Device& device) {
  return host_to_device(at::tensor(values, at::kLong), device);
}

}  // namespace dash::optim
