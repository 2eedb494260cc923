#include "kernels/fused_moments.h"

#include "kernels/fused_moments_cuda.h"
#include "kernels/fused_moments_kernel.h"

#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>

namespace dash::kernels {

namespace {

bool per_block_or_absent(const at::Tensor& correction, const at::Tensor& grad) {
  return !correction.defined() || (correction.scalar_type() == at::kFloat && correction.device() == grad.device() &&
                                      correction.dim() == 3 && correction.size(0) == grad.size(0) &&
                                      correction.size(1) == 1 && correction.size(2) == 1 && correction.is_contiguous());
}

// Flat ranges of elements, each cut where a block ends so that the inner loop has
// the block's bias corrections as constants (and vectorises).
void cpu_step(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat, const at::Tensor& ema_correction,
    const at::Tensor& stat_correction, const SecondMomentCoefficients& k, const at::Tensor& ghat,
    const at::Tensor& graft) {
  const int64_t block_numel = std::max<int64_t>(grad.size(1) * grad.size(2), 1);
  const float* ema_c_data = ema_correction.defined() ? ema_correction.data_ptr<float>() : nullptr;
  const float* stat_c_data = stat_correction.defined() ? stat_correction.data_ptr<float>() : nullptr;
  const float* g = grad.data_ptr<float>();
  float* m = ema.data_ptr<float>();
  float* a = stat.data_ptr<float>();
  float* gh = ghat.data_ptr<float>();
  float* p = graft.data_ptr<float>();
  constexpr int64_t kGrain = 1 << 15;
  const auto elements = [&](int64_t begin, int64_t end) {
    for (int64_t start = begin; start < end;) {
      const int64_t block = start / block_numel;
      const int64_t stop = std::min(end, (block + 1) * block_numel);
      const float c_m = ema_c_data ? ema_c_data[block] : 1.0f;
      const float c_a = stat_c_data ? stat_c_data[block] : 1.0f;
      float* __restrict__ m_run = m + start;
      float* __restrict__ a_run = a + start;
      float* __restrict__ gh_run = gh + start;
      float* __restrict__ p_run = p + start;
      const float* __restrict__ g_run = g + start;
      const SecondMomentCoefficients local = k;  // in registers: the loop vectorises
      for (int64_t i = 0; i < stop - start; ++i) {
        second_moment_element(g_run[i], m_run[i], a_run[i], gh_run[i], p_run[i], c_m, c_a, local);
      }
      start = stop;
    }
  };
  // Three reads and four writes per element: a memory-bound pass. Ranges of blocks on
  // the cores where ATen's pool has one thread, else ATen's parallel loop on its pool.
  kernels::for_each_pass_range(
      grad, 7.0 * static_cast<double>(grad.numel() * grad.element_size()), [&](int64_t first, int64_t last) {
        at::parallel_for(first * block_numel, last * block_numel, kGrain, elements);
      });
}

}  // namespace

bool cuda_kernels_built() {
#ifdef DASH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool fused_second_moment_supported(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const at::Tensor& ghat,
    const at::Tensor& graft) {
  const bool device_ok = grad.device().is_cpu() || (grad.is_cuda() && cuda_kernels_built());
  if (!device_ok || grad.dim() != 3) return false;
  for (const auto* t : {&grad, &ema, &stat, &ghat, &graft}) {
    if (!t->defined() || t->scalar_type() != at::kFloat || !t->is_contiguous() || t->device() != grad.device() ||
        t->sizes() != grad.sizes()) {
      return false;
    }
  }
  // The kernels access all five through restrict pointers (and write four): no two may share memory.
  const std::array<const at::Tensor*, 5> buffers{&grad, &ema, &stat, &ghat, &graft};
  for (size_t i = 0; i < buffers.size(); ++i) {
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (buffers[i]->is_alias_of(*buffers[j])) return false;
    }
  }
  return per_block_or_absent(ema_correction, grad) && per_block_or_absent(stat_correction, grad);
}

void fused_second_moment_step(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const SecondMomentCoefficients& coefficients,
    const at::Tensor& ghat, const at::Tensor& graft) {
  TORCH_CHECK(fused_second_moment_supported(grad, ema, stat, ema_correction, stat_correction, ghat, graft),
      "dash: fused_second_moment_step: needs float32 contiguous (n, rows, cols) tensors of one shape on one device "
      "(CPU, or CUDA in a build with dash's CUDA kernels) and (n, 1, 1) bias corrections; got a gradient of shape ",
      grad.sizes(), " on ", grad.device());
  if (grad.numel() == 0) return;
  if (grad.is_cuda()) {
#ifdef DASH_CUDA_KERNELS
    fused_second_moment_step_cuda(grad, ema, stat, ema_correction, stat_correction, coefficients, ghat, graft);
#endif
    return;
  }
  cpu_step(grad, ema, stat, ema_correction, stat_correction, coefficients, ghat, graft);
}

}  // namespace dash::kernels
