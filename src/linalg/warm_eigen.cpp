// Warm-started eigendecomposition with adaptive refresh: the warm start
// of Distributed Shampoo's QR eigendecomposition, with a criterion aimed at the root.
//
// Between two root computations a Shampoo factor A changes little, so the previous
// eigenvectors Q nearly diagonalise it: B = QᵀAQ = Λ + C with C off-diagonal and
// small. Keeping Q and the Rayleigh quotients Λ = diag(B) gives the root
// Q f(Λ) Qᵀ, f(x) = (x + ε)^{-1/p}, instead of Q f(B) Qᵀ. To first order the
// difference is the Fréchet derivative of f at Λ in the direction C, which by the
// Daleckii–Krein theorem is D ∘ C with the divided differences
//     D_ij = (f(λ_i) − f(λ_j)) / (λ_i − λ_j)   (f'(λ_i) when λ_i = λ_j)
// (Higham, Functions of Matrices, 2008, Thm. 3.11). So
//     estimate = ‖D ∘ C‖_F / ‖f(Λ)‖_F
// is the relative error of the root that keeping Q costs, and Q is kept when it is
// ≤ τ. (Distributed Shampoo's criterion ‖C‖_F ≤ τ‖B‖_F weighs C by the large
// eigenvalues, but an inverse root is dominated by the small ones: on EMA factor
// sequences it accepted bases whose roots were 60 % off.) Otherwise the unshifted
// QR algorithm runs from B, B ← RQ with QR = B, Q ← Q·Q_step, which is orthogonal
// iteration on A from the previous basis (Golub & Van Loan, Matrix Computations,
// §8.2–8.3). A matrix still above τ after the allowed steps, or without a basis,
// gets a full eigh.

#include "linalg/solvers.h"
#include "kernels/stack_lapack.h"

#include <ATen/ATen.h>

namespace dash::linalg {
namespace {

enum Status : int64_t { kKept = 0, kWarm = 1, kRecomputed = 2 };

// The first-order relative root error of keeping the basis that gave B (above),
// per matrix; `epsilon` is (N, 1, 1). Non-finite B gives NaN, which no `≤ τ` accepts.
at::Tensor root_error_estimate(const at::Tensor& b, const at::Tensor& epsilon, int64_t p) {
  const double exponent = -1.0 / static_cast<double>(p);
  auto lambda = b.diagonal(0, -2, -1);
  auto shifted = lambda.clamp_min(0.0) + epsilon.view({-1, 1});
  auto f = shifted.pow(exponent);
  auto gap = lambda.unsqueeze(-1) - lambda.unsqueeze(-2);
  auto f_gap = f.unsqueeze(-1) - f.unsqueeze(-2);
  // Where the eigenvalues (nearly) coincide the quotient is f'(λ_i) = −f(λ_i)/(p(λ_i + ε)):
  // from the vectors, so that no b × b power is taken (the pow of a whole stack
  // cost more than the eigh it saves).
  auto derivative = (f / shifted).mul_(exponent).unsqueeze(-1);
  auto distinct = gap.abs() > (shifted.unsqueeze(-1) + shifted.unsqueeze(-2)) * 1e-4;
  auto divided = at::where(distinct, f_gap / at::where(distinct, gap, at::ones_like(gap)), derivative);
  auto off_diagonal = b - at::diag_embed(lambda);
  return (divided * off_diagonal).flatten(1).norm(2, 1) / f.norm(2, 1);
}

}  // namespace

at::Tensor refresh_eigenbasis(
    const at::Tensor& a, const at::Tensor& epsilon, int64_t p, const EigenOptions& options, Eigenbasis& basis) {
  const auto count = a.size(0);
  const auto index_options = a.options().dtype(at::kLong);
  auto status = at::full({count}, kRecomputed, index_options);
  auto values = at::empty({count, a.size(1)}, a.options());
  auto vectors = at::empty_like(a);
  // τ = 0 is eigh every time (the QR steps could not reach it): no warm start.
  const bool have_basis = options.refresh_tolerance() > 0.0 && basis.vectors.defined() &&
                          basis.vectors.sizes() == a.sizes() && basis.valid.defined();
  if (have_basis) {
    const auto previous = basis.vectors.to(a.scalar_type());
    auto rotated = at::bmm(previous.transpose(1, 2), at::bmm(a, previous));  // B = QᵀAQ
    auto kept = basis.valid & (root_error_estimate(rotated, epsilon, p) <= options.refresh_tolerance());
    status.masked_fill_(kept, kKept);
    vectors.copy_(previous);
    values.copy_(rotated.diagonal(0, -2, -1));
    auto to_iterate = (basis.valid & kept.logical_not()).nonzero().view({-1});  // host read-back
    if (options.warm_iterations() > 0 && to_iterate.numel() > 0) {
      auto b = rotated.index_select(0, to_iterate);
      auto q = previous.index_select(0, to_iterate);
      for (int64_t step = 0; step < options.warm_iterations(); ++step) {
        auto [q_step, r_step] = kernels::stack_qr(b);
        b = at::bmm(r_step, q_step);
        q = at::bmm(q, q_step);
      }
      vectors.index_copy_(0, to_iterate, q);
      values.index_copy_(0, to_iterate, b.diagonal(0, -2, -1));
      auto converged = root_error_estimate(b, epsilon.index_select(0, to_iterate), p) <= options.refresh_tolerance();
      status.index_copy_(0, to_iterate,
          at::where(converged, at::full({}, kWarm, index_options), at::full({}, kRecomputed, index_options)));
    }
  }
  auto stale = (status == kRecomputed).nonzero().view({-1});  // host read-back
  if (stale.numel() > 0) {
    auto stale_matrices = a.index_select(0, stale);
    auto fresh_vectors = kernels::column_major_view(at::empty_like(stale_matrices));
    auto fresh_values = batched_eigh(stale_matrices, fresh_vectors);
    // Largest eigenvalue first: the order the QR algorithm's diagonal converges to.
    // From eigh's ascending order a QR step would start reordering the basis and
    // make it less diagonal, not more. (τ = 0 never warm-starts: eigh's order, so
    // that the roots are plain EVD's bit for bit.)
    const bool warm_later = options.refresh_tolerance() > 0.0;
    values.index_copy_(0, stale, warm_later ? fresh_values.flip(-1) : fresh_values);
    vectors.index_copy_(0, stale, warm_later ? fresh_vectors.flip(-1) : fresh_vectors);
  }
  basis.vectors = vectors;
  basis.valid = at::ones({count}, a.options().dtype(at::kBool));
  basis.status = status;
  return values;
}

}  // namespace dash::linalg
