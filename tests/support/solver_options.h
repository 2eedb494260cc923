#pragma once

// Root options for tests of a method as a solver.

#include <dash/root_options.h>

namespace dash::testing {

/// `method` with the other options at their defaults, except that NewtonDB runs its
/// matmul iteration on every device: NewtonDBEvaluation::Auto, the default, would
/// evaluate it by eigh on a CPU, and the solver tests check the iteration.
inline InverseRootOptions solver_options(RootMethod method) {
  return InverseRootOptions().method(method).newton_db(NewtonDBOptions().evaluation(NewtonDBEvaluation::Matmuls));
}

}  // namespace dash::testing
