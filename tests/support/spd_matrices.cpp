#include "support/spd_matrices.h"

#include <ATen/CPUGeneratorImpl.h>

namespace dash::testing {

at::Tensor random_orthogonal(int64_t count, int64_t b, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  auto gaussian = at::normal(0.0, 1.0, {count, b, b}, generator, at::TensorOptions().dtype(at::kDouble));
  auto [q, r] = at::linalg_qr(gaussian);
  // Fix the signs so that Q is Haar-distributed rather than biased by QR's convention.
  return q * at::sign(at::diagonal(r, 0, -2, -1)).unsqueeze(-2);
}

KnownSpectrum with_eigenvalues(const at::Tensor& eigenvalues, uint64_t seed) {
  TORCH_CHECK(eigenvalues.dim() == 2, "with_eigenvalues: expected (N, b) eigenvalues, got ", eigenvalues.sizes());
  auto values = eigenvalues.to(at::kDouble);
  auto q = random_orthogonal(values.size(0), values.size(1), seed);
  auto a = at::matmul(q * values.unsqueeze(-2), q.transpose(-2, -1));
  a = (a + a.transpose(-2, -1)) * 0.5;  // exactly symmetric
  return {a, values, q};
}

KnownSpectrum log_spaced_spectrum(int64_t count, int64_t b, double condition, uint64_t seed, double top) {
  TORCH_CHECK(condition >= 1.0 && top > 0.0, "log_spaced_spectrum: need condition >= 1 and top > 0, got ", condition,
      " and ", top);
  auto exponents = at::linspace(0.0, -std::log10(condition), b, at::TensorOptions().dtype(at::kDouble));
  auto values = (at::pow(10.0, exponents) * top).expand({count, b}).contiguous();
  return with_eigenvalues(values, seed);
}

at::Tensor ema_updated(const KnownSpectrum& spectrum, double beta, int64_t steps, uint64_t seed) {
  TORCH_CHECK(beta >= 0.0 && beta < 1.0 && steps >= 0, "ema_updated: need beta in [0, 1) and steps >= 0, got ", beta,
      " and ", steps);
  auto generator = at::detail::createCPUGenerator(seed);
  const auto b = spectrum.matrices.size(-1);
  auto root =
      spectrum.vectors * spectrum.eigenvalues.clamp_min(0.0).sqrt().unsqueeze(-2) / std::sqrt(static_cast<double>(b));
  auto factor = spectrum.matrices.clone();
  for (int64_t step = 0; step < steps; ++step) {
    auto gradient =
        at::matmul(root, at::normal(0.0, 1.0, spectrum.matrices.sizes(), generator, spectrum.matrices.options()));
    factor.mul_(beta).add_(at::matmul(gradient, gradient.transpose(-2, -1)), 1.0 - beta);
  }
  return (factor + factor.transpose(-2, -1)) * 0.5;
}

at::Tensor reference_inverse_root(const KnownSpectrum& spectrum, double epsilon, int64_t p) {
  auto weights = (spectrum.eigenvalues + epsilon).pow(-1.0 / static_cast<double>(p));
  return at::matmul(spectrum.vectors * weights.unsqueeze(-2), spectrum.vectors.transpose(-2, -1));
}

at::Tensor eigh_inverse_root(const at::Tensor& matrices, double epsilon, int64_t p) {
  auto [values, vectors] = at::linalg_eigh(matrices.to(at::kDouble));
  // Eigenvalues rounding left below zero (a PSD matrix stored in low precision) count as 0.
  auto weights = (values.clamp_min(0.0) + epsilon).pow(-1.0 / static_cast<double>(p));
  return at::matmul(vectors * weights.unsqueeze(-2), vectors.transpose(-2, -1));
}

at::Tensor relative_errors(const at::Tensor& result, const at::Tensor& reference) {
  TORCH_CHECK(result.numel() == reference.numel(), "relative_errors: ", result.sizes(), " vs ", reference.sizes());
  auto x = result.to(at::kDouble).reshape({-1, result.size(-2), result.size(-1)});
  auto r = reference.to(at::kDouble).reshape_as(x);
  return at::linalg_vector_norm(x - r, 2, {1, 2}) / at::linalg_vector_norm(r, 2, {1, 2});
}

double max_relative_error(const at::Tensor& result, const at::Tensor& reference) {
  return relative_errors(result, reference).max().item<double>();
}

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace dash::testing
