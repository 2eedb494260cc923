#pragma once

// Every field of DashOptions as an X-macro list, and of its InverseRootOptions
// (linalg/root_option_fields.h): the one list that checkpoints (dash_options.cpp)
// and the Python keyword table (src/python/option_dict.cpp) are generated from, so
// that a new option added here reaches both, and that the build checks against the
// TORCH_ARGs of <dash/optimizer_options.h>.

#include <dash/optimizer_options.h>

#include "linalg/root_option_fields.h"

#include <cstring>
#include <string>

// DASH_OPTION_LAYOUT lists the fields in declaration order: FIELD(name, type, help) for
// a scalar or enum (help: what it does, for dash-train's --help), COMPOSITE(name,
// type) for `root` and the pair `adamw_betas`, which each user handles by hand. Laid out by hand (clang-format would re-wrap it).
// clang-format off
#define DASH_OPTION_LAYOUT(FIELD, COMPOSITE)                                                   \
  FIELD(lr, double, "learning rate")                                                           \
  FIELD(preconditioner, PreconditionerType, "preconditioner family: shampoo or spectral_descent")                  \
  FIELD(beta_grad, double, "β_G: EMA of the gradient")                                         \
  FIELD(beta_factor, double, "EMA of the Shampoo factors L, R (1: plain sums)")                \
  FIELD(beta_graft, double, "β_g: EMA of the grafting statistic")                              \
  FIELD(eps_graft, double, "ε of the grafting direction")                                      \
  FIELD(block_size, int64_t, "block size B: matrices are preconditioned in blocks of at most B × B") \
  FIELD(root_frequency, int64_t, "recompute inverse roots every this many steps")              \
  FIELD(start_step, int64_t, "first preconditioned step (before it: the grafting direction)")  \
  COMPOSITE(root, InverseRootOptions)                                                          \
  FIELD(exponent_override, int64_t, "root per side (0: 4 for matrices, 2 for 1-D Shampoo)")    \
  FIELD(grafting, GraftingType, "adam, rmsprop, adagrad, sgd or none")                         \
  FIELD(momentum, double, "momentum of the preconditioned direction (0: none)")                \
  FIELD(nesterov, bool, "Nesterov's form of that momentum")                                    \
  FIELD(weight_decay, double, "decoupled weight decay W ← W(1 − lr·wd)")                       \
  FIELD(decay_one_dimensional, bool, "decay the 1-D parameters too (false: matrices only)")    \
  FIELD(bias_correction, bool, "bias-correct the EMAs of the gradient and the grafting statistic") \
  FIELD(one_dimensional, OneDimensional, "1-D parameters: adamw or shampoo (one factor)")      \
  COMPOSITE(adamw_betas, DashOptions::betas_t)                                                 \
  FIELD(adamw_eps, double, "ε of the 1-D parameters' AdamW")                                   \
  FIELD(execution, Execution, "batched (DASH), sequential (block by block) or auto (timed per factor stack)") \
  FIELD(non_finite_gradients, NonFiniteGradients, "a NaN or Inf gradient: error, skip-step or unchecked") \
  FIELD(max_consecutive_root_failures, int64_t,                                                \
      "raise once a factor's roots failed this many computations in a row (0: never)")         \
  FIELD(preconditioning_precision, MatmulPrecision, "fp32 or bf16 operands of the preconditioning products L̄ Ĝ R̄") \
  FIELD(workspace_limit, double,                                                               \
      "memory a step may use besides the optimizer state: a fraction of it in (0, 1), bytes from 1 on, 0: no limit") \
  FIELD(factor_precision, MatmulPrecision, "storage of the Shampoo factors L, R: fp32 or bf16") \
  FIELD(root_precision, MatmulPrecision, "storage of their inverse roots: fp32 or bf16")       \
  FIELD(moment_precision, MatmulPrecision, "storage of the blocks' gradient EMA and grafting statistic: fp32 or bf16") \
  FIELD(maximize, bool, "maximise the objective instead (every gradient negated)")                \
  FIELD(nesterov_grad, bool, "Nesterov's form of Ĝ for the family: (1 − β_G)·G + β_G·Ĝ (Muon's nesterov)") \
  FIELD(newton_schulz_steps, int64_t, "spectral descent: Newton–Schulz iterations (Muon's 5)")
#define DASH_SKIP_COMPOSITE(name, type)
/// The scalar and enum fields: FIELD(name, type, help).
#define DASH_OPTION_FIELDS(FIELD) DASH_OPTION_LAYOUT(FIELD, DASH_SKIP_COMPOSITE)
// clang-format on

namespace dash::optim::option_fields {

/// The optimizer's keyword for a root option (Python's dash.Dash, dash-train):
/// `method` alone would not say of what.
inline const char* optimizer_keyword(const char* root_field) {
  return std::strcmp(root_field, "method") == 0 ? "root_method" : root_field;
}

// Name → enum for the fields' enum types, one overload per type (the pointer only
// selects it), for code that sets a field by its type from a name.
inline RootMethod parse_name(const std::string& name, RootMethod*) { return parse_root_method(name); }
inline EigenHeuristic parse_name(const std::string& name, EigenHeuristic*) { return parse_eigen_heuristic(name); }
inline Scaling parse_name(const std::string& name, Scaling*) { return parse_scaling(name); }
inline NewtonDBPolynomial parse_name(const std::string& name, NewtonDBPolynomial*) {
  return parse_newton_db_polynomial(name);
}
inline NewtonDBEvaluation parse_name(const std::string& name, NewtonDBEvaluation*) {
  return parse_newton_db_evaluation(name);
}
inline MatmulPrecision parse_name(const std::string& name, MatmulPrecision*) { return parse_matmul_precision(name); }
inline PreconditionerType parse_name(const std::string& name, PreconditionerType*) {
  return parse_preconditioner_type(name);
}
inline GraftingType parse_name(const std::string& name, GraftingType*) { return parse_grafting_type(name); }
inline Execution parse_name(const std::string& name, Execution*) { return parse_execution(name); }
inline OneDimensional parse_name(const std::string& name, OneDimensional*) { return parse_one_dimensional(name); }
inline NonFiniteGradients parse_name(const std::string& name, NonFiniteGradients*) {
  return parse_non_finite_gradients(name);
}

// As for the solver structs (root_option_fields.h): the mirror has DashOptions'
// size only if the list names every TORCH_ARG (padding aside).
#define DASH_MIRROR_MEMBER(name, type, help) type name;
#define DASH_MIRROR_COMPOSITE(name, type) type name;
struct DashFields : torch::optim::OptimizerOptions {
  DASH_OPTION_LAYOUT(DASH_MIRROR_MEMBER, DASH_MIRROR_COMPOSITE)
};
#undef DASH_MIRROR_MEMBER
#undef DASH_MIRROR_COMPOSITE
static_assert(sizeof(DashFields) == sizeof(DashOptions), "DASH_OPTION_LAYOUT must list every DashOptions field");

}  // namespace dash::optim::option_fields
