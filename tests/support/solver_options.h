#pragma once

// Root options for tests of a method as a solver.

#include <dash/root_options.h>

#include <vector>

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

/// The solvers (kSolverMethods, in its order) whose traits satisfy `wanted`, e.g.
/// `solvers_where([](SolverTraits t) { return t.newton_iteration; })`.
template <typename Wanted>
std::vector<RootMethod> solvers_where(Wanted wanted) {
  std::vector<RootMethod> methods;
  for (auto method : kSolverMethods) {
    if (wanted(solver_traits(method))) methods.push_back(method);
  }
  return methods;
}

/// The solvers that iterate to a root as exact as the precision allows (all but
/// fixed-degree approximations), the Newton iterations, the matmul-only solvers.
inline std::vector<RootMethod> converging_solvers() {
  return solvers_where([](SolverTraits traits) { return !traits.fixed_degree; });
}
inline std::vector<RootMethod> newton_solvers() {
  return solvers_where([](SolverTraits traits) { return traits.newton_iteration; });
}
inline std::vector<RootMethod> matmul_solvers() {
  return solvers_where([](SolverTraits traits) { return traits.matmul_only; });
}

}  // namespace dash::testing
