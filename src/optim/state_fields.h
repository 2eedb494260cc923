#pragma once

// The optimizer state described once. Every state tensor is a field of a table:
// the engine's per-block moments here (moment_fields), each preconditioner
// family's own next to it (src/optim/families/). A field has a name (its entry in
// the state keyed by parameter: "block.<j>.<name>"), a storage (which precision
// option, or a fixed dtype) and the values it may hold. The state keyed by
// parameter (Dash::parameter_state) is generated from the tables, and through it
// every checkpoint (torch::save, Python's state dicts, torch.distributed.checkpoint,
// any world size), the state's byte count, its precision conversions and the checks
// that refuse a poisoned state when it is loaded.

#include <dash/optimizer_options.h>

#include "optim/block_state.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <string>

namespace dash::optim {

/// How a field is stored: in a state-precision option's dtype, or a fixed one.
enum class FieldStorage { MomentPrecision, FactorPrecision, RootPrecision, Float32, Int64, Bool };

/// What a field's elements may hold; a loaded entry that holds anything else is
/// refused (it would make the parameters NaN, or a schedule nonsense).
enum class FieldValues {
  Real,         ///< finite numbers
  NonNegative,  ///< finite numbers ≥ 0 (second moments)
  Count,        ///< whole numbers ≥ 0 (step counts, failures in a row)
  Flag,         ///< true or false
};

/// The dtype of a field stored as `storage` under `options`.
at::ScalarType storage_dtype(FieldStorage storage, const DashOptions& options);

/// One tensor of a state struct `State` (stacked: one row per block or factor).
template <typename State>
struct StateField {
  const char* name;
  at::Tensor State::*tensor;
  FieldStorage storage;
  FieldValues values;
};

/// The engine's per-block fields: a block's moments and its step count t (the
/// AdamW parameters' the same names, per element). Which exist follows from the
/// options (A with a grafting statistic, B_m with momentum): a field is kept where
/// its tensor is defined.
inline constexpr std::array<StateField<MomentState>, 4> moment_fields{{
    {"grad_ema", &MomentState::grad_ema, FieldStorage::MomentPrecision, FieldValues::Real},
    {"graft_stat", &MomentState::graft_stat, FieldStorage::MomentPrecision, FieldValues::NonNegative},
    {"momentum", &MomentState::momentum, FieldStorage::MomentPrecision, FieldValues::Real},
    {"step", &MomentState::steps, FieldStorage::Float32, FieldValues::Count},
}};

/// Refuses `saved` unless every element holds `values`, naming `what` (a host read:
/// loads only).
void check_values(const at::Tensor& saved, FieldValues values, const std::string& what);

/// Copies `saved` into `into` (a row or view of the live state) once it has
/// `into`'s shape and dtype and holds `values`; else throws, naming `what`.
void copy_entry(at::Tensor into, const at::Tensor& saved, FieldValues values, const std::string& what);

}  // namespace dash::optim
