#pragma once

// Root options for tests of a method as a solver.

#include <dash/root_options.h>

namespace dash::testing {

/// `options` with NewtonDB evaluated as `evaluation`.
inline InverseRootOptions with_evaluation(InverseRootOptions options, NewtonDBEvaluation evaluation) {
  options.newton_db().evaluation(evaluation);
  return options;
}

/// `method` with the other options at their defaults, except that NewtonDB runs its
/// matmul iteration on every device: NewtonDBEvaluation::Auto, the default, would
/// evaluate it by eigh on a CPU, and the solver tests check the iteration.
inline InverseRootOptions solver_options(RootMethod method) {
  return with_evaluation(InverseRootOptions().method(method), NewtonDBEvaluation::Matmuls);
}

}  // namespace dash::testing
