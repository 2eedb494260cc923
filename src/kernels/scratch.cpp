#include "kernels/scratch.h"

#include <ATen/ATen.h>

namespace dash::kernels {
namespace {

bool is_free(const at::Tensor& buffer) { return buffer.storage().use_count() == 1; }

bool fits(const at::Tensor& buffer, const at::TensorOptions& options) {
  return buffer.scalar_type() == c10::typeMetaToScalarType(options.dtype()) && buffer.device() == options.device();
}

}  // namespace

at::Tensor Scratch::empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  int64_t numel = 1;
  for (auto size : sizes) numel *= size;
  at::Tensor* best = nullptr;
  at::Tensor* too_small = nullptr;
  for (auto& buffer : buffers_) {
    if (!fits(buffer, options) || !is_free(buffer)) continue;
    if (buffer.numel() >= numel) {
      if (best == nullptr || buffer.numel() < best->numel()) best = &buffer;
    } else if (too_small == nullptr || buffer.numel() > too_small->numel()) {
      too_small = &buffer;
    }
  }
  if (best == nullptr) {
    auto fresh = at::empty({numel}, options.memory_format(c10::nullopt));
    if (too_small != nullptr) {
      *too_small = std::move(fresh);
      best = too_small;
    } else {
      buffers_.push_back(std::move(fresh));
      best = &buffers_.back();
    }
  }
  return best->narrow(0, 0, numel).view(sizes);
}

int64_t Scratch::bytes() const {
  int64_t total = 0;
  for (const auto& buffer : buffers_) total += buffer.numel() * static_cast<int64_t>(buffer.element_size());
  return total;
}

}  // namespace dash::kernels
