#pragma once

// Every field of InverseRootOptions and of the solver structs it composes, as
// X-macro lists of (flat name, type, accessor): the flat names are the keys of
// checkpoints ("root.<name>") and Python's keywords; the accessor reaches the
// field, e.g. `options.newton().steps()` to read and `options.newton().steps(v)` to
// write. Each solver struct's list takes the path to the struct as its second
// argument (empty: the struct itself), so that one list serves both the flat
// InverseRootOptions view and the completeness checks below.

#include <dash/root_options.h>

// The lists are laid out by hand (clang-format would re-wrap the macros), each in
// its struct's declaration order.
// clang-format off
#define DASH_EIGEN_FIELDS(FIELD, PATH)                                         \
  FIELD(eigen_heuristic, EigenHeuristic, PATH heuristic)                       \
  FIELD(eigen_refresh_tolerance, double, PATH refresh_tolerance)               \
  FIELD(eigen_warm_iterations, int64_t, PATH warm_iterations)
#define DASH_NEWTON_FIELDS(FIELD, PATH)                                        \
  FIELD(newton_steps, int64_t, PATH steps)                                     \
  FIELD(tolerance, double, PATH tolerance)                                     \
  FIELD(tolerance_check_interval, int64_t, PATH check_interval)
#define DASH_NEWTON_DB_FIELDS(FIELD, PATH)                                     \
  FIELD(newton_db_polynomial, NewtonDBPolynomial, PATH polynomial)             \
  FIELD(minimax_interval_min, double, PATH interval_min)                        \
  FIELD(newton_db_evaluation, NewtonDBEvaluation, PATH evaluation)
#define DASH_CHEBYSHEV_FIELDS(FIELD, PATH)                                     \
  FIELD(chebyshev_degree, int64_t, PATH degree)                                \
  FIELD(chebyshev_interval_min, double, PATH interval_min)
#define DASH_SCALING_FIELDS(FIELD, PATH)                                       \
  FIELD(scaling, Scaling, PATH method)                                         \
  FIELD(power_iterations, int64_t, PATH iterations)                            \
  FIELD(power_vectors, int64_t, PATH vectors)                                  \
  FIELD(power_margin, double, PATH margin)
// InverseRootOptions itself: its own fields, and each solver struct through STRUCT.
#define DASH_ROOT_LAYOUT(FIELD, STRUCT)                                        \
  FIELD(method, RootMethod, method)                                            \
  STRUCT(FIELD, EigenOptions, eigen, DASH_EIGEN_FIELDS)                        \
  STRUCT(FIELD, NewtonOptions, newton, DASH_NEWTON_FIELDS)                     \
  STRUCT(FIELD, NewtonDBOptions, newton_db, DASH_NEWTON_DB_FIELDS)             \
  STRUCT(FIELD, ChebyshevOptions, chebyshev, DASH_CHEBYSHEV_FIELDS)            \
  STRUCT(FIELD, SpectralScaleOptions, scaling, DASH_SCALING_FIELDS)            \
  FIELD(auto_max_error, double, auto_max_error)                                \
  FIELD(epsilon, double, epsilon)                                              \
  FIELD(relative_epsilon, double, relative_epsilon)                            \
  FIELD(precision, MatmulPrecision, precision)
#define DASH_EXPAND_STRUCT(FIELD, type, member, LIST) LIST(FIELD, member().)
/// Every option, flat: FIELD(flat name, type, accessor path from InverseRootOptions).
#define DASH_ROOT_FIELDS(FIELD) DASH_ROOT_LAYOUT(FIELD, DASH_EXPAND_STRUCT)
// clang-format on

namespace dash::linalg::option_fields {

// A struct with the listed members, in the listed order, has the size of the
// options struct when the list names all of its TORCH_ARGs: a field added to a
// struct but not to its list (so neither saved nor reachable from Python) stops the
// build here, unless it fits into padding (DashCheckpoint.EverySolverOptionRoundTrips
// names every field by hand).
#define DASH_MIRROR_MEMBER(flat_name, type, member) type member;
struct EigenFields {
  DASH_EIGEN_FIELDS(DASH_MIRROR_MEMBER, )
};
struct NewtonFields {
  DASH_NEWTON_FIELDS(DASH_MIRROR_MEMBER, )
};
struct NewtonDBFields {
  DASH_NEWTON_DB_FIELDS(DASH_MIRROR_MEMBER, )
};
struct ChebyshevFields {
  DASH_CHEBYSHEV_FIELDS(DASH_MIRROR_MEMBER, )
};
struct ScalingFields {
  DASH_SCALING_FIELDS(DASH_MIRROR_MEMBER, )
};
#define DASH_MIRROR_STRUCT(FIELD, type, member, LIST) type member;
struct RootFields {
  DASH_ROOT_LAYOUT(DASH_MIRROR_MEMBER, DASH_MIRROR_STRUCT)
};
#undef DASH_MIRROR_STRUCT
#undef DASH_MIRROR_MEMBER
static_assert(sizeof(EigenFields) == sizeof(EigenOptions), "DASH_EIGEN_FIELDS must list every EigenOptions field");
static_assert(sizeof(NewtonFields) == sizeof(NewtonOptions), "DASH_NEWTON_FIELDS must list every NewtonOptions field");
static_assert(
    sizeof(NewtonDBFields) == sizeof(NewtonDBOptions), "DASH_NEWTON_DB_FIELDS must list every NewtonDBOptions field");
static_assert(sizeof(ChebyshevFields) == sizeof(ChebyshevOptions),
    "DASH_CHEBYSHEV_FIELDS must list every ChebyshevOptions field");
static_assert(sizeof(ScalingFields) == sizeof(SpectralScaleOptions),
    "DASH_SCALING_FIELDS must list every SpectralScaleOptions field");
static_assert(
    sizeof(RootFields) == sizeof(InverseRootOptions), "DASH_ROOT_LAYOUT must list every InverseRootOptions field");

}  // namespace dash::linalg::option_fields
