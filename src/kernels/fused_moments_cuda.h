#pragma once

// The CUDA side of fused_second_moment_step (fused_moments.h), defined in
// fused_moments_cuda.cu: built only against a CUDA LibTorch (DASH_CUDA_KERNELS).

#include "kernels/fused_moments.h"

namespace dash::kernels {

void fused_second_moment_step_cuda(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const SecondMomentCoefficients& coefficients,
    const at::Tensor& ghat, const at::Tensor& graft);

}  // namespace dash::kernels
