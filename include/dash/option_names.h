#pragma once

// Names of the solver enums, for command lines, config files and reports.
// Parsing is case-insensitive and rejects unknown names with the list of valid ones.

#include <dash/inverse_root.h>

#include <string>

namespace dash {

std::string to_string(RootMethod method);
std::string to_string(EigenHeuristic heuristic);
std::string to_string(Scaling scaling);
std::string to_string(MatmulPrecision precision);

/// "evd", "cn" | "coupled-newton", "ndb" | "newton-db", "chebyshev".
RootMethod parse_root_method(const std::string& name);
/// "shampoo", "abs", "abs-add", "pseudo-inverse".
EigenHeuristic parse_eigen_heuristic(const std::string& name);
/// "fro" | "frobenius", "pi" | "power-iteration", "multi-pi" | "multi-power-iteration".
Scaling parse_scaling(const std::string& name);
/// "fp32", "fp16", "bf16".
MatmulPrecision parse_matmul_precision(const std::string& name);

}  // namespace dash
