#pragma once

#include <string>
#include <vector>

namespace dash::bench {

/// `dash-bench solvers`: every method × scaling × precision on the preset's
/// (N, b) stacks; prints a table, writes JSON, returns the exit code.
int run_solver_bench(const std::vector<std::string>& args);

}  // namespace dash::bench
