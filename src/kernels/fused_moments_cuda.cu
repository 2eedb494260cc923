// The CUDA side of fused_second_moment_step (fused_moments.h): one grid-stride
// kernel on the current stream. Compiled only against a CUDA LibTorch.

#include "kernels/fused_moments_cuda.h"
#include "kernels/fused_moments_kernel.h"

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

namespace dash::kernels {
namespace {

__global__ void second_moment_kernel(const float* __restrict__ grad, float* __restrict__ ema,
    float* __restrict__ stat, const float* __restrict__ ema_correction, const float* __restrict__ stat_correction,
    SecondMomentCoefficients coefficients, float* __restrict__ ghat, float* __restrict__ graft, int64_t numel,
    int64_t block_numel) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const int64_t block = i / block_numel;
    const float c_m = ema_correction ? ema_correction[block] : 1.0f;
    const float c_a = stat_correction ? stat_correction[block] : 1.0f;
    float m = ema[i];
    float a = stat[i];
    float gh;
    float p;
    second_moment_element(grad[i], m, a, gh, p, c_m, c_a, coefficients);
    ema[i] = m;
    stat[i] = a;
    ghat[i] = gh;
    graft[i] = p;
  }
}

const float* data_or_null(const at::Tensor& tensor) {
  return tensor.defined() ? tensor.data_ptr<float>() : nullptr;
}

}  // namespace

void fused_second_moment_step_cuda(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const SecondMomentCoefficients& coefficients,
    const at::Tensor& ghat, const at::Tensor& graft) {
  const c10::cuda::CUDAGuard guard(grad.device());
  const int64_t numel = grad.numel();
  const int64_t block_numel = std::max<int64_t>(grad.size(1) * grad.size(2), 1);
  constexpr int kThreads = 256;
  // One thread per element up to a cap (524 k blocks of 256, far more than any GPU runs at
  // once); past it, the grid-stride loop gives threads several elements, and the block
  // count stays an int.
  const int64_t wanted = (numel + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<int64_t>(wanted, int64_t{1} << 19));
  second_moment_kernel<<<blocks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(grad.data_ptr<float>(),
      ema.data_ptr<float>(), stat.data_ptr<float>(), data_or_null(ema_correction), data_or_null(stat_correction),
      coefficients, ghat.data_ptr<float>(), graft.data_ptr<float>(), numel, block_numel);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace dash::kernels
