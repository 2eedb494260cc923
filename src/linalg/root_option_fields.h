#pragma once

// Every field of InverseRootOptions and of the solver structs it composes, as
// X-macro lists of (flat name, type, accessor, help): the flat names are the keys of
// checkpoints ("root.<name>") and Python's keywords; the accessor reaches the
// field, e.g. `options.newton().steps()` to read and `options.newton().steps(v)` to
// write. Each solver struct's list takes the path to the struct as its second
// argument (empty: the struct itself), so that one list serves both the flat
// InverseRootOptions view and the completeness checks below.

#include <dash/root_options.h>

// The lists are laid out by hand (clang-format would re-wrap the macros), each in
// its struct's declaration order.
// clang-format off
#define DASH_EIGEN_FIELDS(FIELD, PATH)                                                   \
  FIELD(eigen_heuristic, EigenHeuristic, PATH heuristic,                                 \
      "evd: how eigenvalues are repaired before inversion: shampoo, abs, abs-add or pseudo-inverse") \
  FIELD(eigen_refresh_tolerance, double, PATH refresh_tolerance,                         \
      "evd: reuse a factor's eigenvectors while its root stays within this relative error (0: eigh every time)") \
  FIELD(eigen_warm_iterations, int64_t, PATH warm_iterations,                            \
      "evd: QR steps from the previous eigenvectors before falling back to eigh")
#define DASH_NEWTON_FIELDS(FIELD, PATH)                                                  \
  FIELD(newton_steps, int64_t, PATH steps, "cn / ndb iterations")                        \
  FIELD(tolerance, double, PATH tolerance,                                               \
      "cn / ndb: stop once every residual is at most this (0: always run newton_steps)") \
  FIELD(tolerance_check_interval, int64_t, PATH check_interval,                          \
      "cn / ndb: check the tolerance every this many steps (each check reads a scalar back)")
#define DASH_NEWTON_DB_FIELDS(FIELD, PATH)                                               \
  FIELD(newton_db_polynomial, NewtonDBPolynomial, PATH polynomial,                       \
      "ndb: step polynomial, newton-schulz (the paper's), minimax3 or minimax5")         \
  FIELD(minimax_interval_min, double, PATH interval_min,                                 \
      "ndb minimax: lower end of the normalised spectrum the polynomials are made for")  \
  FIELD(newton_db_evaluation, NewtonDBEvaluation, PATH evaluation,                       \
      "ndb: matmuls (the coupled iteration), eigh (the same function of the eigenvalues, at EVD's cost) or auto " \
      "(eigh on a CPU in fp32, matmuls elsewhere)")
#define DASH_CHEBYSHEV_FIELDS(FIELD, PATH)                                               \
  FIELD(chebyshev_degree, int64_t, PATH degree, "chebyshev: polynomial degree (degree - 1 matmuls)") \
  FIELD(chebyshev_interval_min, double, PATH interval_min,                               \
      "chebyshev: lower end of the normalised spectrum it interpolates on")
#define DASH_SCALING_FIELDS(FIELD, PATH)                                                 \
  FIELD(scaling, Scaling, PATH method, "spectral scale of the matmul solvers: fro, pi or multi-pi") \
  FIELD(power_iterations, int64_t, PATH iterations, "power-iteration steps of pi / multi-pi scaling") \
  FIELD(power_vectors, int64_t, PATH vectors, "multi-pi: start vectors per matrix, 1 to 32") \
  FIELD(power_margin, double, PATH margin,                                               \
      "pi / multi-pi: the scale is this times the estimated largest eigenvalue")
// InverseRootOptions itself: its own fields, and each solver struct through STRUCT.
#define DASH_ROOT_LAYOUT(FIELD, STRUCT)                                                  \
  FIELD(method, RootMethod, method,                                                      \
      "evd, cn, ndb, chebyshev or auto (the fastest within auto_max_error, per factor stack)") \
  STRUCT(FIELD, EigenOptions, eigen, DASH_EIGEN_FIELDS)                                  \
  STRUCT(FIELD, NewtonOptions, newton, DASH_NEWTON_FIELDS)                               \
  STRUCT(FIELD, NewtonDBOptions, newton_db, DASH_NEWTON_DB_FIELDS)                       \
  STRUCT(FIELD, ChebyshevOptions, chebyshev, DASH_CHEBYSHEV_FIELDS)                      \
  STRUCT(FIELD, SpectralScaleOptions, scaling, DASH_SCALING_FIELDS)                      \
  FIELD(auto_max_error, double, auto_max_error,                                          \
      "auto: largest root error (on gradients like the factor's) a method may have to be chosen") \
  FIELD(epsilon, double, epsilon, "ε of the root of A + εI")                             \
  FIELD(relative_epsilon, double, relative_epsilon,                                      \
      "ε_rel: roots of A + max(ε, ε_rel·λ_max)·I (0: off)")                              \
  FIELD(precision, MatmulPrecision, precision, "fp32, fp16 or bf16 matmuls in the root solver")
#define DASH_EXPAND_STRUCT(FIELD, type, member, LIST) LIST(FIELD, member().)
/// Every option, flat: FIELD(flat name, type, accessor path from InverseRootOptions,
/// help: what it does, for dash-train's --help and the docs).
#define DASH_ROOT_FIELDS(FIELD) DASH_ROOT_LAYOUT(FIELD, DASH_EXPAND_STRUCT)
// clang-format on

namespace dash::linalg::option_fields {

// A struct with the listed members, in the listed order, has the size of the
// options struct when the list names all of its TORCH_ARGs: a field added to a
// struct but not to its list (so neither saved nor reachable from Python) stops the
// build here, unless it fits into padding (DashCheckpoint.EverySolverOptionRoundTrips
// names every field by hand).
#define DASH_MIRROR_MEMBER(flat_name, type, member, help) type member;
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
