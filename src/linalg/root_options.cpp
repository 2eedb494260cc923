// Validation of the solver options (<dash/root_options.h>). Each message names the
// option twice: the flat name that dash.Dash and checkpoints use, then its C++ path.

#include <dash/root_options.h>

#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

namespace dash {
namespace {

// Newton steps, Chebyshev terms and power iterations each cost a few matmuls over
// the stack: a thousand is far past any use (the solvers converge in tens) and
// still finishes; a mistyped 10⁷ would run for hours.
constexpr int64_t kMaxIterations = 1000;

}  // namespace

void check_solver_options(const EigenOptions& options) {
  TORCH_CHECK(options.refresh_tolerance() >= 0.0 && options.refresh_tolerance() <= 1.0,
      "dash::inverse_root: eigen_refresh_tolerance (eigen.refresh_tolerance) must be in [0, 1], got ",
      options.refresh_tolerance());
  TORCH_CHECK(options.warm_iterations() >= 0 && options.warm_iterations() <= 100,
      "dash::inverse_root: eigen_warm_iterations (eigen.warm_iterations) must be in [0, 100], got ",
      options.warm_iterations());
}

void check_solver_options(const NewtonOptions& options) {
  TORCH_CHECK(options.steps() >= 1 && options.steps() <= kMaxIterations,
      "dash::inverse_root: newton_steps (newton.steps) must be in [1, ", kMaxIterations, "], got ", options.steps());
  TORCH_CHECK(options.tolerance() >= 0.0,
      "dash::inverse_root: tolerance (newton.tolerance) must be >= 0 (0 = fixed steps), got ", options.tolerance());
  TORCH_CHECK(options.check_interval() >= 1,
      "dash::inverse_root: tolerance_check_interval (newton.check_interval) must be >= 1, got ",
      options.check_interval());
}

void check_solver_options(const NewtonDBOptions& options) {
  TORCH_CHECK(options.interval_min() >= 1e-12 && options.interval_min() < 1.0,
      "dash::inverse_root: minimax_interval_min (newton_db.interval_min) must be in [1e-12, 1), got ",
      options.interval_min());
}

void check_solver_options(const ChebyshevOptions& options) {
  TORCH_CHECK(options.degree() >= 1 && options.degree() <= kMaxIterations,
      "dash::inverse_root: chebyshev_degree (chebyshev.degree) must be in [1, ", kMaxIterations, "], got ",
      options.degree());
  TORCH_CHECK(options.interval_min() > 0.0 && options.interval_min() < 1.0,
      "dash::inverse_root: chebyshev_interval_min (chebyshev.interval_min) must be in (0, 1), got ",
      options.interval_min());
}

void check_solver_options(const SpectralScaleOptions& options) {
  TORCH_CHECK(options.iterations() >= 1 && options.iterations() <= kMaxIterations,
      "dash::inverse_root: power_iterations (scaling.iterations) must be in [1, ", kMaxIterations, "], got ",
      options.iterations());
  TORCH_CHECK(options.vectors() >= 1 && options.vectors() <= 32,
      "dash::inverse_root: power_vectors (scaling.vectors) must be in [1, 32], got ", options.vectors());
  TORCH_CHECK(options.margin() >= 1.0 && std::isfinite(options.margin()),
      "dash::inverse_root: power_margin (scaling.margin) must be finite and >= 1, got ", options.margin());
}

void check_inverse_root_options(int64_t p, const InverseRootOptions& options) {
  // Shampoo asks for p = 2·(tensor order); beyond 64 a root is the identity to float precision.
  TORCH_CHECK(p >= 1 && p <= 64, "dash::inverse_root: root p must be an integer in [1, 64], got p = ", p);
  // ε is added to float32 factors: above FLT_MAX it is not a float32 number.
  TORCH_CHECK(options.epsilon() >= 0.0 && options.epsilon() <= std::numeric_limits<float>::max(),
      "dash::inverse_root: epsilon must be in [0, ", std::numeric_limits<float>::max(), "] (float32's largest), got ",
      options.epsilon());
  TORCH_CHECK(options.relative_epsilon() >= 0.0 && options.relative_epsilon() < 1.0,
      "dash::inverse_root: relative_epsilon must be in [0, 1), got ", options.relative_epsilon());
  // Every struct is checked whatever the method: RootMethod::Auto tries them all,
  // and an option set for another method is still a mistake worth naming.
  check_solver_options(options.eigen());
  check_solver_options(options.newton());
  check_solver_options(options.newton_db());
  check_solver_options(options.chebyshev());
  check_solver_options(options.scaling());
  TORCH_CHECK(
      options.auto_max_error() > 0.0, "dash::inverse_root: auto_max_error must be > 0, got ", options.auto_max_error());
  TORCH_CHECK(options.method() != RootMethod::NewtonDB || (p & (p - 1)) == 0,
      "dash::inverse_root: NewtonDB computes roots p = 1 or a power of two, got p = ", p);
  if (options.method() == RootMethod::NewtonDB &&
      options.newton_db().polynomial() != NewtonDBPolynomial::NewtonSchulz &&
      options.newton_db().evaluation() != NewtonDBEvaluation::Eigh && options.precision() != MatmulPrecision::FP32) {
    // Measured (docs/benchmarks.md, "Accuracy per matmul"): the minimax steps lift
    // small eigenvalues 5–8× per step, and 16-bit rounding of Z·Y with them; the
    // coupled iteration does not correct the drift.
    TORCH_WARN_ONCE(
        "dash::inverse_root: NewtonDB minimax polynomials with 16-bit matmuls amplify rounding "
        "(measured relative errors up to 0.6 at condition 1e2, where Newton-Schulz reaches 8e-3); "
        "use them with fp32");
  }
}

NewtonDBEvaluation resolve_newton_db_evaluation(const InverseRootOptions& options, const c10::Device& device) {
  const auto evaluation = options.newton_db().evaluation();
  if (evaluation != NewtonDBEvaluation::Auto) return evaluation;
  return device.is_cpu() && options.precision() == MatmulPrecision::FP32 ? NewtonDBEvaluation::Eigh
                                                                         : NewtonDBEvaluation::Matmuls;
}

}  // namespace dash
