// Spectral scale s ≥ λ_max for the iterative solvers (spec §5, "Scaling s").

#include <dash/inverse_root.h>

#include "linalg/batched_matmul.h"
#include "linalg/matrix_checks.h"
#include "linalg/solvers.h"
#include "kernels/stack_reductions.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>

namespace dash {
namespace {

constexpr int64_t kLow32 = 0xFFFFFFFFLL;

// h · c mod 2^32 for 32-bit h and c, in two 16-bit halves so that no int64
// product overflows.
at::Tensor multiply_mod_2_32(const at::Tensor& h, int64_t c) {
  auto low = h * (c & 0xFFFF);
  auto high = (h * (c >> 16)).bitwise_and_(0xFFFF).__lshift__(16);
  return low.add_(high).bitwise_and_(kLow32);
}

}  // namespace

namespace linalg {

// An integer hash (the 32-bit finaliser of MurmurHash3) on the device: pure (no
// generator state), identical for every matrix of a stack and for every device,
// and no host-to-device copy.
at::Tensor power_start_vectors(int64_t b, int64_t v, const at::TensorOptions& options) {
  auto h = multiply_mod_2_32(at::arange(1, b * v + 1, options.dtype(at::kLong)), 0x9E3779B1LL);
  h = multiply_mod_2_32(h.bitwise_xor(h.__rshift__(16)), 0x85EBCA6BLL);
  h = multiply_mod_2_32(h.bitwise_xor(h.__rshift__(13)), 0xC2B2AE35LL);
  h = h.bitwise_xor(h.__rshift__(16));
  return h.to(options.dtype()).mul_(2.0 / 4294967296.0).sub_(1.0).reshape({b, v});
}

}  // namespace linalg

namespace {

// margin · max_j ‖A v_j‖ after `iterations` steps of v ← A v / ‖A v‖, for all
// start vectors at once as one (N, b, v) batched matmul (multi-vector power
// iteration, DASH §3.3). ‖A v‖ with unit v never exceeds λ_max for symmetric A
// and is at least the Rayleigh quotient, so it is the tighter lower bound.
at::Tensor power_iteration_scale(const at::Tensor& a, int64_t vectors, const SpectralScaleOptions& options,
    MatmulPrecision precision, kernels::Scratch& scratch) {
  const auto tiny = std::numeric_limits<float>::min();
  auto v = linalg::power_start_vectors(a.size(-1), vectors, a.options());
  v = (v / at::linalg_vector_norm(v, 2, {0}, /*keepdim=*/true).clamp_min(tiny)).expand({a.size(0), -1, -1});
  at::Tensor norms;
  // Every step reads the whole stack: rounded to the operand dtype once, not per step.
  const auto a_operand = linalg::as_operand(a, precision, scratch);
  for (int64_t i = 0; i < options.iterations(); ++i) {
    auto w = linalg::matmul(a_operand, v, precision, scratch);
    norms = at::linalg_vector_norm(w, 2, {1}, /*keepdim=*/true);
    // Clamped so that an all-zero block gives s = 0 rather than 0/0. In place: the
    // iterates alternate between two Scratch buffers.
    v = w.div_(norms.clamp_min(tiny));
  }
  return std::get<0>(norms.max(/*dim=*/2, /*keepdim=*/true)) * options.margin();
}

}  // namespace

namespace linalg {

at::Tensor spectral_scale(const at::Tensor& matrices, const SpectralScaleOptions& options, MatmulPrecision precision,
    kernels::Scratch& scratch, const at::Tensor& magnitude_of_matrices) {
  TORCH_CHECK(matrices.dim() == 2 || matrices.dim() == 3,
      "dash::estimate_spectral_scale: expected a (b, b) matrix or an (N, b, b) stack, got ", matrices.dim(),
      " dimensions");
  const bool single = matrices.dim() == 2;
  auto a = single ? matrices.unsqueeze(0) : matrices;
  // Divide by the largest entry first: squares of entries above ~1e19 overflow
  // float32 in ‖A‖_F, and 16-bit power iteration needs entries near 1.
  auto magnitude =
      (magnitude_of_matrices.defined() ? magnitude_of_matrices.view({-1, 1, 1}) : kernels::largest_magnitude(a))
          .clamp_min(std::numeric_limits<float>::min());
  auto unit = scratch.empty_like(a);
  at::div_out(unit, a, magnitude);
  at::Tensor relative;
  switch (options.method()) {
    case Scaling::Frobenius:
      relative = at::linalg_vector_norm(unit, 2, {1, 2}, /*keepdim=*/true);
      break;
    case Scaling::PowerIteration:
      relative = power_iteration_scale(unit, 1, options, precision, scratch);
      break;
    case Scaling::MultiPowerIteration:
      relative = power_iteration_scale(unit, options.vectors(), options, precision, scratch);
      break;
  }
  auto scale = relative * magnitude;
  return single ? scale.squeeze(0) : scale;
}

}  // namespace linalg

at::Tensor estimate_spectral_scale(
    const at::Tensor& matrices, const SpectralScaleOptions& options, MatmulPrecision precision) {
  linalg::check_square_stack(matrices, "dash::estimate_spectral_scale");
  check_solver_options(options);  // inverse_root() checks them with the rest of its options
  kernels::Scratch scratch;
  return linalg::spectral_scale(matrices, options, precision, scratch);
}

}  // namespace dash
