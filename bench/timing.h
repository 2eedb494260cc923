#pragma once

// Wall-clock timing of tensor work, synchronised on accelerators.

#include <dash/inverse_root.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace dash::bench {

struct TimingSummary {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
};

/// Runs `work` `warmup` times untimed, then `repetitions` times timed. `work`
/// returns a tensor the device must have finished before the clock stops.
TimingSummary time_it(const std::function<at::Tensor()>& work, int warmup, int repetitions);

/// The operand dtype of a matmul precision mode.
at::ScalarType matmul_dtype(MatmulPrecision precision);

/// GFLOP/s of a plain (count, b, b) × (count, b, b) bmm in `dtype` on `device`, into
/// a preallocated output, best of `repetitions` —
/// the ceiling that solver and step throughput are compared with. Where the
/// backend has no kernel for `dtype` (LibTorch 1.13: no float16 bmm on CPU) it
/// measures float32 and reports that in `measured_dtype`.
double bmm_gflops(int64_t count, int64_t b, at::ScalarType dtype, const at::Device& device, int warmup, int repetitions,
    std::string* measured_dtype = nullptr);

/// How a stack's eigh and QR run on `device` (src/kernels/core_ranges.h), in words.
std::string lapack_plan_description(const at::Device& device);

/// How the matmul solvers' symmetric products run on `device` in FP32 mode
/// (src/kernels/stack_blas.h), in words.
std::string solver_products_description(const at::Device& device);

/// `--tf32 1`: float32 matmuls may run as TF32 on tensor cores, as the paper's
/// "fp32" GPU rows did (LibTorch's default keeps IEEE float32). Sets it
/// process-wide and returns it in words for the report.
std::string set_float32_matmul_mode(bool allow_tf32);

}  // namespace dash::bench
