#pragma once

// What the CPU this process runs on lacks for 16-bit matmuls, so that a path that
// would be slow without it says so once instead of being silently slow.

#include <c10/core/ScalarType.h>

#include <string>

namespace dash::kernels {

/// Whether this CPU is known to lack matmul instructions for `dtype`: on x86,
/// bfloat16 without AVX512-BF16 and AMX-BF16, float16 without AVX512-FP16 and
/// AMX-FP16 (CPUID). There LibTorch converts in software or, without AVX-512,
/// multiplies in a plain loop. False for float32 and float64, and on other
/// architectures, where it is not known.
bool cpu_lacks_native_matmul(c10::ScalarType dtype);

/// The warning for `dtype` matmuls on a CPU that lacks instructions for them.
std::string slow_cpu_matmul_warning(c10::ScalarType dtype);

}  // namespace dash::kernels
