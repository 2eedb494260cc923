#pragma once

// Per-matrix selection in an (N, b, b) stack: which matrices of a stack take new
// values, chosen by an (N,) mask on the device. On a GPU these are where/masked_fill
// kernels. On a CPU the mask is host memory, so only the matrices it names are
// written: ATen's where and masked_fill with an (N, 1, 1) mask run at a third of a
// copy's speed on a CPU, and a masked fill that (nearly always) fills nothing still
// writes the whole stack (docs/experiments/2026-12-05-memory-passes.md, "Memory passes around the roots").

#include <ATen/core/Tensor.h>

namespace dash::kernels {

/// dst[i] ← src[i] where mask[i], for (N, b, b) stacks of one dtype and device and an
/// (N,) bool mask (at::where_out(dst, mask, src, dst)).
void copy_matrices_where(const at::Tensor& dst, const at::Tensor& mask, const at::Tensor& src);

/// dst[i] ← value where mask[i] (dst.masked_fill_(mask.view({-1, 1, 1}), value)).
void fill_matrices_where(const at::Tensor& dst, const at::Tensor& mask, double value);

}  // namespace dash::kernels
