#pragma once

#include <string>
#include <vector>

namespace dash::bench {

/// dash-bench accuracy: for each condition number, method × scaling × precision,
/// the fewest b³-matmuls (over the solver's step count or degree) that reach
/// relative error 1e-2 and 1e-3 against float64, and the time of that solve.
int run_accuracy_bench(const std::vector<std::string>& args);

/// The default of its --methods: every matmul-only solver, NewtonDB once more per
/// minimax polynomial ("ndb-minimax3", ...).
std::string accuracy_method_names();

}  // namespace dash::bench
