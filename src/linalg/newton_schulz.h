#pragma once

// Muon's orthogonalisation (K. Jordan et al., "Muon: an optimizer for hidden layers
// in neural networks", 2024; Bernstein & Newhouse, arXiv 2409.20325, for spectral
// descent): the quintic Newton–Schulz iteration
//
//   X₀ = G / (‖G‖_F + 1e-7),   A = X Xᵀ,   X ← a·X + (b·A + c·A²)·X,
//
// with (a, b, c) = (3.4445, −4.7750, 2.0315). The coefficients maximise the slope at
// zero rather than converge: after 5 steps the singular values of X lie in about
// [0.7, 1.2] instead of at 1 (U S' Vᵀ for G = U S Vᵀ), which trains as well as U Vᵀ.
// ‖G‖_F bounds the spectral norm, so X₀'s singular values are in [0, 1], where the
// polynomial is meant to act. Matmul-only, so a stack of equal-shaped blocks is one
// batched call per product.

#include <dash/inverse_root.h>

#include "kernels/scratch.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dash::linalg {

/// The coefficients of one step, Muon's.
struct NewtonSchulzCoefficients {
  double a = 3.4445;
  double b = -4.7750;
  double c = 2.0315;
};

/// `steps` iterations over a float32 stack `g` (N, rows, cols), into `out` (float32,
/// g's shape; it may be g itself) and returned. A tall stack (rows > cols) is
/// iterated on its transposes, so that A is min(rows, cols)² (Muon's orientation).
/// The matmul operands are in `precision`; in BF16 the iterate X stays in bfloat16
/// between steps, as in Muon's reference. X₀'s norm is taken in float32. The
/// temporaries come from `scratch`: after its first call it allocates nothing.
at::Tensor& newton_schulz_into(at::Tensor& out, const at::Tensor& g, int64_t steps, MatmulPrecision precision,
    kernels::Scratch& scratch, const NewtonSchulzCoefficients& coefficients = {});

/// Matmul FLOPs of `steps` iterations on one (rows, cols) matrix, with m = min and
/// n = max of the two: per step A = X Xᵀ (2m²n; m(m + 1)n as one triangle by syrk
/// where `one_triangle`, as a CPU BLAS does), A² (2m³; by one triangle where
/// `one_triangle`, kernels::symmetric_product_flops) and B·X (2m²n).
double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps, bool one_triangle);

/// Bytes of `scratch` one call takes per matrix of a (rows, cols) stack beyond `out`:
/// X, A, B and the next X, in the operand dtype, and the norm.
int64_t newton_schulz_bytes_per_matrix(int64_t rows, int64_t cols, MatmulPrecision precision);

}  // namespace dash::linalg
