#pragma once

// The optimizer state's storage precision (DashOptions::factor_precision,
// root_precision, moment_precision). State kept in bfloat16 is widened to float32
// for the arithmetic, a chunk at a time, and rounded back once per update: an
// update's products and sums are float32 ones, and its one rounding to bfloat16
// (relative 2⁻⁹) is the only difference from float32 state.

#include <dash/root_options.h>

#include "kernels/scratch.h"

#include <ATen/core/Tensor.h>

namespace dash::optim {

/// The dtype of state stored in `precision`: float32 or bfloat16 (FP16 is refused by
/// check_options).
at::ScalarType state_dtype(MatmulPrecision precision);

/// Replaces `state` by a copy in `dtype` where it has another; an undefined tensor
/// stays undefined. Returns whether it was converted.
bool convert_state(at::Tensor& state, at::ScalarType dtype);

/// `stored` as float32 for arithmetic: itself when it is float32 (or undefined), else
/// a float32 copy in a buffer of `scratch` (linalg::in_dtype).
at::Tensor widened(const at::Tensor& stored, kernels::Scratch& scratch);

/// Writes `computed` (what arithmetic made of widened(stored)) back into `stored`,
/// rounding to its dtype (over the cores: kernels::copy_over_cores); nothing when
/// they are one tensor.
void store_rounded(const at::Tensor& stored, const at::Tensor& computed);

}  // namespace dash::optim
