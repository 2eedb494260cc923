#pragma once

// Names of the solver and optimizer enums, for command lines, config files and reports.
// Parsing is case-insensitive and rejects unknown names with the list of valid ones.

#include <dash/inverse_root.h>
#include <dash/optimizer.h>

#include <string>

namespace dash {

std::string to_string(RootMethod method);
std::string to_string(EigenHeuristic heuristic);
std::string to_string(Scaling scaling);
std::string to_string(NewtonDBPolynomial polynomial);
std::string to_string(MatmulPrecision precision);
std::string to_string(GraftingType grafting);
std::string to_string(Execution execution);
std::string to_string(CommunicationDtype dtype);
std::string to_string(OneDimensional treatment);
std::string to_string(NonFiniteGradients policy);

/// "evd", "cn" | "coupled-newton", "ndb" | "newton-db", "chebyshev", "auto".
RootMethod parse_root_method(const std::string& name);
/// "shampoo", "abs", "abs-add", "pseudo-inverse".
EigenHeuristic parse_eigen_heuristic(const std::string& name);
/// "fro" | "frobenius", "pi" | "power-iteration", "multi-pi" | "multi-power-iteration".
Scaling parse_scaling(const std::string& name);
/// "newton-schulz", "minimax3", "minimax5".
NewtonDBPolynomial parse_newton_db_polynomial(const std::string& name);
/// "fp32", "fp16", "bf16".
MatmulPrecision parse_matmul_precision(const std::string& name);
/// "adam", "rmsprop", "adagrad", "sgd", "none".
GraftingType parse_grafting_type(const std::string& name);
/// "auto", "batched", "sequential".
Execution parse_execution(const std::string& name);
/// "fp32", "bf16", "fp16".
CommunicationDtype parse_communication_dtype(const std::string& name);
/// "adamw", "shampoo-1d".
OneDimensional parse_one_dimensional(const std::string& name);
/// "error", "skip-step".
NonFiniteGradients parse_non_finite_gradients(const std::string& name);

}  // namespace dash
