#pragma once

#include <string>
#include <vector>

namespace dash::bench {

/// `dash-bench distributed`: one DASH configuration's step time, state memory and
/// bytes communicated per step on 1 or more local Gloo ranks (--nproc); prints a
/// line, writes JSON from rank 0, returns the exit code.
int run_distributed_bench(const std::vector<std::string>& args);

}  // namespace dash::bench
