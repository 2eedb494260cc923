#include <dash/solver_cost.h>

#include "linalg/solvers.h"
#include "kernels/stack_blas.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dash {
namespace {

// Matmuls of N^p·M by repeated squaring (coupled_newton.cpp): one per squaring
// and one per set bit of p.
int64_t power_times_matmuls(int64_t p) {
  int64_t squarings = 0;
  int64_t products = 0;
  for (int64_t rest = p; rest > 0; rest >>= 1) {
    products += rest & 1;
    squarings += rest > 1;
  }
  return squarings + products;
}

// Matmuls of NewtonDB (newton_denman_beavers.cpp), split into the whole products
// (W = Z·Y and a quintic's W·W) and the symmetric ones (Y·E, E·Z, B·E₀, and p = 1's
// Z·Z), which a CPU computes one triangle at a time.
struct NewtonDBMatmuls {
  int64_t whole = 0;
  int64_t symmetric = 0;
};

// One pass. A step's E costs nothing for a cubic and one matmul (c₂W·W) for a
// quintic, and its Z·Y one more after the first step (Z₀ = I); then Y·E and E·Z,
// of which the last step skips the one the pass does not return, and the first
// step has only Y.
void add_newton_db_pass(const std::vector<linalg::OddPolynomial>& steps, bool returns_root, NewtonDBMatmuls& count) {
  for (size_t k = 0; k < steps.size(); ++k) {
    const bool first = k == 0;
    const bool last = k + 1 == steps.size();
    count.whole += (steps[k].coefficients[2] != 0.0 ? 1 : 0) + (first ? 0 : 1);
    if (!last || returns_root) count.symmetric += 1;               // Y·E
    if (!first && (!last || !returns_root)) count.symmetric += 1;  // E·Z
  }
}

NewtonDBMatmuls newton_db_matmuls(int64_t p, const InverseRootOptions& options) {
  const auto schedule = linalg::newton_db_schedule(p, options.newton(), options.newton_db(), options.precision());
  NewtonDBMatmuls count;
  count.symmetric = p == 1 ? 1 : 0;  // p = 1 squares the inverse square root
  for (size_t pass = 0; pass < schedule.size(); ++pass) {
    add_newton_db_pass(schedule[pass], /*returns_root=*/pass + 1 < schedule.size(), count);
  }
  return count;
}

double scaling_flops(int64_t b, const InverseRootOptions& options) {
  const double bd = static_cast<double>(b);
  switch (options.scaling().method()) {
    case Scaling::Frobenius:
      return 0.0;
    case Scaling::PowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.scaling().iterations());
    case Scaling::MultiPowerIteration:
      return 2.0 * bd * bd * static_cast<double>(options.scaling().iterations() * options.scaling().vectors());
  }
  return 0.0;
}

// One b × b GEMM, 2b³.
double gemm_flops(int64_t b) {
  const double bd = static_cast<double>(b);
  return 2.0 * bd * bd * bd;
}

// A root from an eigendecomposition: 9b³ for eigh (4.5 GEMMs), then Q diag Qᵀ.
double eigen_root_flops(double matmul, double reconstruction) { return 9.0 / 2.0 * matmul + reconstruction; }

// FLOPs of one b × b inverse root whose symmetric solver products cost `product`
// each (a GEMM, 2b³, where they are not computed one triangle at a time) and whose
// eigen-reconstruction Q diag Qᵀ costs `reconstruction`; NewtonDB evaluated as
// `evaluation` (Matmuls or Eigh).
double per_matrix_flops(int64_t b, int64_t p, const InverseRootOptions& options, double product, double reconstruction,
    NewtonDBEvaluation evaluation) {
  const double matmul = gemm_flops(b);
  switch (options.method()) {
    case RootMethod::EVD:
      return eigen_root_flops(matmul, reconstruction);
    case RootMethod::CoupledNewton:
      // Step 1: X₁ = c·N is free; every step: X·N (not in step 1) and N^p·M.
      return scaling_flops(b, options) +
             product * static_cast<double>(options.newton().steps() * (1 + power_times_matmuls(p)) - 1);
    case RootMethod::NewtonDB: {
      // Its eigenvalue evaluation is EVD's work: the scalar recurrences are O(b) each.
      if (evaluation == NewtonDBEvaluation::Eigh) return eigen_root_flops(matmul, reconstruction);
      const auto matmuls = newton_db_matmuls(p, options);
      return scaling_flops(b, options) + matmul * static_cast<double>(matmuls.whole) +
             product * static_cast<double>(matmuls.symmetric);
    }
    case RootMethod::Chebyshev:
      return scaling_flops(b, options) +
             product * static_cast<double>(std::max<int64_t>(options.chebyshev().degree() - 1, 0));
    case RootMethod::Auto:
      TORCH_CHECK(false, "dash::inverse_root_flops: RootMethod::Auto has no cost of its own; pass the method it chose");
  }
  return 0.0;
}

void check_counts(int64_t count, int64_t b, int64_t p) {
  TORCH_CHECK(count >= 0 && b >= 0 && p >= 1, "dash::inverse_root_flops: need count >= 0, b >= 0, p >= 1; got ", count,
      ", ", b, ", ", p);
}

}  // namespace

double inverse_root_flops(int64_t count, int64_t b, int64_t p, const InverseRootOptions& options) {
  check_counts(count, b, p);
  // Without a device, Auto counts as the paper's iteration.
  const auto evaluation = options.newton_db().evaluation() == NewtonDBEvaluation::Eigh ? NewtonDBEvaluation::Eigh
                                                                                       : NewtonDBEvaluation::Matmuls;
  return static_cast<double>(count) * per_matrix_flops(b, p, options, gemm_flops(b), gemm_flops(b), evaluation);
}

double inverse_root_flops(
    int64_t count, int64_t b, int64_t p, const InverseRootOptions& options, const at::Device& device) {
  check_counts(count, b, p);
  const double bd = static_cast<double>(b);
  const bool full_precision = options.precision() == MatmulPrecision::FP32;
  const double product = full_precision && kernels::stack_symmetric_product_plan(device).one_triangle
                             ? kernels::symmetric_product_flops(b)
                             : gemm_flops(b);
  const double reconstruction =
      full_precision && kernels::stack_syrk_plan(device).one_triangle ? bd * bd * (bd + 1.0) : gemm_flops(b);
  return static_cast<double>(count) *
         per_matrix_flops(b, p, options, product, reconstruction, resolve_newton_db_evaluation(options, device));
}

namespace {

// b × b float32 matrices inverse_root() holds per input matrix (its workspace
// buffers, and what its ATen operations allocate besides), measured with c10's
// memory-reporting hook at b = 32…256 and rounded up (test_solver_cost checks
// them): EVD and NewtonDB by eigh copy the input, take Q and form Q diag Qᵀ;
// coupled Newton keeps M', N, X and the products of N^p·M; Chebyshev its shifted
// input, two Clenshaw terms and their products; a warm eigenbasis its QR and
// Rayleigh–Ritz products. 16-bit operands add rounded copies (FP16 more on a CPU,
// whose float16 products are emulated in float32).
double matrices_per_matrix(const InverseRootOptions& options, const at::Device& device, bool warm_basis) {
  const auto precision = options.precision();
  auto by_precision = [&](double fp32, double bf16, double fp16) {
    return precision == MatmulPrecision::FP32 ? fp32 : precision == MatmulPrecision::BF16 ? bf16 : fp16;
  };
  switch (options.method()) {
    case RootMethod::EVD:
      if (warm_basis) return by_precision(12.5, 13.5, 15.0);
      return by_precision(3.0, 4.0, 6.0);
    case RootMethod::NewtonDB:
      if (resolve_newton_db_evaluation(options, device) == NewtonDBEvaluation::Eigh) return by_precision(3.0, 4.0, 6.0);
      return by_precision(5.0, 5.5, 7.5);
    case RootMethod::CoupledNewton:
      return by_precision(6.5, 7.0, 9.0);
    case RootMethod::Chebyshev:
      return by_precision(9.5, 11.5, 14.0);
    case RootMethod::Auto:
      break;
  }
  TORCH_CHECK(false,
      "dash::inverse_root_workspace_bytes: RootMethod::Auto has no workspace of its own; pass the "
      "method it chose");
}

}  // namespace

int64_t inverse_root_workspace_bytes(
    int64_t count, int64_t b, const InverseRootOptions& options, const at::Device& device, bool warm_basis) {
  TORCH_CHECK(
      count >= 0 && b >= 0, "dash::inverse_root_workspace_bytes: need count >= 0 and b >= 0, got ", count, " and ", b);
  const double matrix = 4.0 * static_cast<double>(b) * static_cast<double>(b);
  // Power iteration's (N, b, k) vectors and the (N, b) eigenvalues, twice over.
  const bool iterative = options.scaling().method() != Scaling::Frobenius;
  const double vectors = 4.0 * static_cast<double>(b) * (2.0 * (iterative ? options.scaling().vectors() : 0) + 4.0);
  const double per_matrix = matrices_per_matrix(options, device, warm_basis) * matrix + vectors;
  // Per call: an identity, a constant term, a LAPACK or matmul scratch.
  return static_cast<int64_t>(std::ceil(static_cast<double>(count) * per_matrix + 5.0 * matrix));
}

}  // namespace dash
