#pragma once

// Root-inverse Shampoo's state, per factor stack (all factors of one size and root
// in one parameter group, stacked (N, b, b)): its field table, which the family's
// allocation, entries, loads, precision conversions and byte counts iterate. A
// block's entries are its factors' rows, one per side ("factor_left", ...).

#include <dash/optimizer.h>
#include <dash/root_method_choice.h>

#include "optim/state_fields.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <vector>

namespace dash::optim {

struct FactorStackState {
  at::Tensor factors;  ///< (N, b, b), in factor_precision
  at::Tensor roots;    ///< (N, b, b) in root_precision; identity until a root is first computed
  /// Allocated at the stack's first root computation: (N,) int64, the root
  /// computations each factor has failed in a row.
  at::Tensor consecutive_failures{};
  /// EVD with eigen_refresh_tolerance > 0: each factor's last eigenvectors ((N, b, b)
  /// float32) and whether they are valid ((N,) bool), allocated at the first such
  /// root computation.
  at::Tensor eigenvectors{};
  at::Tensor eigenbasis_valid{};

  // The stack's counters (diagnostics; state, but not per factor: a load restarts them).
  at::Tensor failures;  ///< () int64: roots kept because the new one failed
  /// () int64, factors reset to zero because they had overflowed or were about to
  /// (with consecutive_failures); (3,) int64, how many roots kept their basis, were
  /// warm-started, were recomputed by eigh (with the eigenvectors; cumulative).
  at::Tensor factor_resets{};
  at::Tensor refresh_counts{};

  // The stack's choices (saved with every block as "root_choice_<side>").
  /// Execution::Auto's choice for this stack's roots (Auto: not yet timed).
  Execution root_execution = Execution::Auto;
  bool calibration_pending = true;  ///< Auto: the first root computation is not timed
  double calibrated_batched_ms = 0.0;
  double calibrated_per_block_ms = 0.0;
  /// RootMethod::Auto's choice for this stack (Auto: not made yet), and the trials
  /// it was made from (not saved: empty after a checkpoint is loaded).
  RootMethod root_method = RootMethod::Auto;
  std::vector<RootMethodTrial> root_method_trials{};

  /// Without a workspace limit, float32 roots rounded to a 16-bit
  /// preconditioning_precision, made by the first step that needs them after the
  /// roots changed (not state, not saved).
  at::Tensor root_operands{};
  bool root_operands_current = false;
};

/// The shape of one factor's row of a field.
enum class FactorRow { Matrix, Scalar };

/// When a field of a factor stack exists: with the state (roots start as the
/// identity, the rest as zeros), from the stack's first root computation, or from its
/// first warm-started EVD. Before then a factor's entry shows the zeros it will be
/// allocated as; a state saved before a field existed loads it as those zeros.
enum class FactorPresence { Kept, FirstRoot, WarmStart };

struct FactorField {
  const char* name;  ///< a block's entry: name + "_left" / "_right"
  at::Tensor FactorStackState::*tensor;
  FieldStorage storage;
  FieldValues values;
  FactorRow row;
  FactorPresence presence;
};

inline constexpr std::array<FactorField, 5> factor_fields{{
    {"factor", &FactorStackState::factors, FieldStorage::FactorPrecision, FieldValues::Real, FactorRow::Matrix,
        FactorPresence::Kept},
    {"root", &FactorStackState::roots, FieldStorage::RootPrecision, FieldValues::Real, FactorRow::Matrix,
        FactorPresence::Kept},
    {"consecutive_failures", &FactorStackState::consecutive_failures, FieldStorage::Int64, FieldValues::Count,
        FactorRow::Scalar, FactorPresence::FirstRoot},
    {"eigenvectors", &FactorStackState::eigenvectors, FieldStorage::Float32, FieldValues::Real, FactorRow::Matrix,
        FactorPresence::WarmStart},
    {"eigenbasis_valid", &FactorStackState::eigenbasis_valid, FieldStorage::Bool, FieldValues::Flag, FactorRow::Scalar,
        FactorPresence::WarmStart},
}};

/// The stack's counters and when each is allocated.
inline constexpr std::array<std::pair<at::Tensor FactorStackState::*, FactorPresence>, 3> factor_stack_counters{{
    {&FactorStackState::failures, FactorPresence::Kept},
    {&FactorStackState::factor_resets, FactorPresence::FirstRoot},
    {&FactorStackState::refresh_counts, FactorPresence::WarmStart},
}};

/// A fresh stack of `count` factors of `size` on `device` for a group with
/// `options`: the Kept fields and counters.
FactorStackState zero_factor_stack(int64_t count, int64_t size, const DashOptions& options, const at::Device& device);

/// Allocates the fields and counters of `presence` that `state` lacks (zeros).
void allocate_factor_fields(FactorStackState& state, FactorPresence presence);

/// One factor's row of `field` in `state`, where it is allocated; else the zeros
/// of a row it will be allocated as.
at::Tensor factor_row(const FactorStackState& state, const FactorField& field, int64_t row);

/// The whole state in `options`' precisions (converted where a field's storage
/// option changed); returns whether the roots were.
bool convert_factor_stack(FactorStackState& state, const DashOptions& options);

}  // namespace dash::optim
