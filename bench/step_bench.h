#pragma once

#include <string>
#include <vector>

namespace dash::bench {

/// `dash-bench step`: optimizer-step cost on model shapes; prints a table, writes
/// JSON, returns the exit code.
int run_step_bench(const std::vector<std::string>& args);

}  // namespace dash::bench
