#pragma once

// Every field of DashOptions and of its InverseRootOptions, as X-macro lists of
// (name, type): the one list that checkpoints (dash_options.cpp) and the Python
// keyword table (src/python/option_dict.cpp) are generated from, so that a new
// option added here reaches both. adamw_betas (a pair) is handled by each user.

#include <dash/optimizer.h>

// The lists are laid out by hand (clang-format would re-wrap the macro).
// clang-format off
#define DASH_OPTION_FIELDS(FIELD)                                                     \
  FIELD(lr, double) FIELD(beta_grad, double) FIELD(beta_factor, double)                \
  FIELD(beta_graft, double) FIELD(eps_graft, double) FIELD(block_size, int64_t)        \
  FIELD(root_frequency, int64_t) FIELD(start_step, int64_t)                            \
  FIELD(exponent_override, int64_t) FIELD(grafting, GraftingType) FIELD(momentum, double) \
  FIELD(nesterov, bool) FIELD(weight_decay, double) FIELD(decay_one_dimensional, bool)  \
  FIELD(bias_correction, bool) FIELD(one_dimensional, OneDimensional)                  \
  FIELD(adamw_eps, double) FIELD(execution, Execution)                                 \
  FIELD(non_finite_gradients, NonFiniteGradients) FIELD(max_consecutive_root_failures, int64_t)

#define DASH_ROOT_FIELDS(FIELD)                                                         \
  FIELD(method, RootMethod) FIELD(eigen_heuristic, EigenHeuristic) FIELD(scaling, Scaling) \
  FIELD(power_iterations, int64_t) FIELD(power_vectors, int64_t) FIELD(power_margin, double) \
  FIELD(newton_steps, int64_t) FIELD(tolerance, double) FIELD(tolerance_check_interval, int64_t) \
  FIELD(chebyshev_degree, int64_t) FIELD(chebyshev_interval_min, double) FIELD(epsilon, double) \
  FIELD(precision, MatmulPrecision) FIELD(eigen_refresh_tolerance, double) FIELD(eigen_warm_iterations, int64_t) \
  FIELD(newton_db_polynomial, NewtonDBPolynomial) FIELD(minimax_interval_min, double) \
  FIELD(auto_max_error, double)
// clang-format on
