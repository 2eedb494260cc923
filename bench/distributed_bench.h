#pragma once

#include <string>
#include <vector>

namespace dash::bench {

/// `dash-bench distributed`: one DASH configuration on 1 or more local Gloo ranks
/// (--nproc), per distribution scheme: step time, bytes sent per step (measured on
/// loopback) and memory per rank; prints a table, writes JSON from rank 0, returns
/// the exit code.
int run_distributed_bench(const std::vector<std::string>& args);

}  // namespace dash::bench
