#pragma once

// The arithmetic of one element of fused_second_moment_step (fused_moments.h),
// shared by the CPU loop and the CUDA kernel: one formula for both. They still
// differ in rounding where a compiler contracts a multiply-add into an FMA (nvcc
// does by default, GCC on baseline x86-64 cannot), as ATen's own kernels differ
// between devices; tests compare to float64 with tolerances, not bit for bit.

#include "kernels/fused_moments.h"

#include <cmath>

#ifdef __CUDACC__
#define DASH_HOST_DEVICE __host__ __device__
#else
#define DASH_HOST_DEVICE
#endif

namespace dash::kernels {

DASH_HOST_DEVICE inline void second_moment_element(float g, float& m, float& a, float& ghat, float& graft,
    float ema_correction, float stat_correction, const SecondMomentCoefficients& k) {
  // The operations of the unfused ATen path, in its order: M·d + w·G, A·d + w·G·G.
  m = m * k.grad_decay + k.grad_weight * g;
  a = a * k.stat_decay + k.stat_weight * g * g;
  ghat = m / ema_correction;
  graft = ghat / (sqrtf(a / stat_correction) + k.eps);
}

}  // namespace dash::kernels
