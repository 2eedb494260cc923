#pragma once

// Spec §4 steps 5–6 for the second-moment graftings (Adam, RMSprop, AdaGrad) in one
// pass over memory. As ATen operations the step is nine element-wise kernels that
// read and write the stack 21 times; it is memory-bound on every device (on an
// H200 it was a third of the non-root step's device time, llama-953m, B = 1024).
// One kernel reads G, M and A and writes M, A, Ĝ and P_g: 7 passes.

#include <ATen/core/Tensor.h>

namespace dash::kernels {

/// The scalars of the fused update (float32, as ATen casts them for float32 tensors);
/// the grafting fills them from the step's hyper-parameters.
struct SecondMomentCoefficients {
  float grad_decay = 0.0f;  ///< M ← grad_decay · M + grad_weight · G
  float grad_weight = 0.0f;
  float stat_decay = 0.0f;  ///< A ← stat_decay · A + stat_weight · G²
  float stat_weight = 0.0f;
  float eps = 0.0f;  ///< P_g = Ĝ / (√(A / c_A) + eps)
};

/// Whether fused_second_moment_step runs on these tensors: float32, contiguous, of
/// one shape (n, rows, cols) and no two sharing memory; bias corrections contiguous
/// (n, 1, 1) or undefined; on the CPU or (in a build with dash's CUDA kernels) on a
/// CUDA device.
bool fused_second_moment_supported(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const at::Tensor& ghat,
    const at::Tensor& graft);

/// Element by element: M ← d_M M + w_M G, A ← d_A A + w_A G², Ĝ = M / c_M and
/// P_g = Ĝ / (√(A / c_A) + ε), with c_M, c_A the bias corrections of each block
/// (undefined: 1). M and A in place; Ĝ and P_g into `ghat` and `graft`.
void fused_second_moment_step(const at::Tensor& grad, const at::Tensor& ema, const at::Tensor& stat,
    const at::Tensor& ema_correction, const at::Tensor& stat_correction, const SecondMomentCoefficients& coefficients,
    const at::Tensor& ghat, const at::Tensor& graft);

/// Whether this build has dash's CUDA kernels (built against a CUDA LibTorch).
bool cuda_kernels_built();

}  // namespace dash::kernels
