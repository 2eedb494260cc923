#pragma once

// Every field of DashOptions as an X-macro list, and of its InverseRootOptions
// (linalg/root_option_fields.h): the one list that checkpoints (dash_options.cpp)
// and the Python keyword table (src/python/option_dict.cpp) are generated from, so
// that a new option added here reaches both, and that the build checks against the
// TORCH_ARGs of <dash/optimizer_options.h>.

#include <dash/optimizer_options.h>

#include "linalg/root_option_fields.h"

// DASH_OPTION_LAYOUT lists the fields in declaration order: FIELD(name, type) for a
// scalar or enum, COMPOSITE(name, type) for `root` and the pair `adamw_betas`,
// which each user handles by hand. Laid out by hand (clang-format would re-wrap it).
// clang-format off
#define DASH_OPTION_LAYOUT(FIELD, COMPOSITE)                                          \
  FIELD(lr, double) FIELD(beta_grad, double) FIELD(beta_factor, double)                \
  FIELD(beta_graft, double) FIELD(eps_graft, double) FIELD(block_size, int64_t)        \
  FIELD(root_frequency, int64_t) FIELD(start_step, int64_t)                            \
  COMPOSITE(root, InverseRootOptions)                                                  \
  FIELD(exponent_override, int64_t) FIELD(grafting, GraftingType) FIELD(momentum, double) \
  FIELD(nesterov, bool) FIELD(weight_decay, double) FIELD(decay_one_dimensional, bool)  \
  FIELD(bias_correction, bool) FIELD(one_dimensional, OneDimensional)                  \
  COMPOSITE(adamw_betas, DashOptions::betas_t)                                         \
  FIELD(adamw_eps, double) FIELD(execution, Execution)                                 \
  FIELD(non_finite_gradients, NonFiniteGradients) FIELD(max_consecutive_root_failures, int64_t) \
  FIELD(preconditioning_precision, MatmulPrecision) FIELD(workspace_limit, double)     \
  FIELD(factor_precision, MatmulPrecision) FIELD(root_precision, MatmulPrecision)      \
  FIELD(moment_precision, MatmulPrecision) FIELD(maximize, bool)
#define DASH_SKIP_COMPOSITE(name, type)
/// The scalar and enum fields: FIELD(name, type).
#define DASH_OPTION_FIELDS(FIELD) DASH_OPTION_LAYOUT(FIELD, DASH_SKIP_COMPOSITE)
// clang-format on

namespace dash::optim::option_fields {

// As for the solver structs (root_option_fields.h): the mirror has DashOptions'
// size only if the list names every TORCH_ARG (padding aside).
#define DASH_MIRROR_MEMBER(name, type) type name;
struct DashFields : torch::optim::OptimizerOptions {
  DASH_OPTION_LAYOUT(DASH_MIRROR_MEMBER, DASH_MIRROR_MEMBER)
};
#undef DASH_MIRROR_MEMBER
static_assert(sizeof(DashFields) == sizeof(DashOptions), "DASH_OPTION_LAYOUT must list every DashOptions field");

}  // namespace dash::optim::option_fields
