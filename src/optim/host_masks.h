#pragma once

// Masks decided on the host (which blocks are due, active, past t_start), sent to
// the device as bool tensors.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dash::optim {

/// `values` as an (N,) bool tensor on `device` (through bytes: std::vector<bool>
/// has no contiguous storage).
inline at::Tensor bool_mask(const std::vector<bool>& values, const at::Device& device) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return at::tensor(bytes, at::kByte).to(device).to(at::kBool);
}

}  // namespace dash::optim
