#include "kernels/cpu_features.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__has_include)
#if __has_include(<cpuid.h>)
#include <cpuid.h>
#define DASH_HAVE_CPUID 1
#endif
#endif

namespace dash::kernels {
namespace {

// The 16-bit matmul instructions, from CPUID leaf 7 (Intel SDM vol. 2A, "CPUID").
struct SixteenBitMatmuls {
  bool known = false;  // x86 with CPUID leaf 7
  bool bfloat16 = false;
  bool float16 = false;
};

SixteenBitMatmuls detect() {
  SixteenBitMatmuls found;
#ifdef DASH_HAVE_CPUID
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return found;
  found.known = true;
  const unsigned max_subleaf = eax;
  const bool amx_bf16 = (edx >> 22) & 1u;
  const bool avx512_fp16 = (edx >> 23) & 1u;
  bool avx512_bf16 = false;
  bool amx_fp16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0) {
    avx512_bf16 = (eax >> 5) & 1u;
    amx_fp16 = (eax >> 21) & 1u;
  }
  found.bfloat16 = avx512_bf16 || amx_bf16;
  found.float16 = avx512_fp16 || amx_fp16;
#endif
  return found;
}

}  // namespace

bool cpu_lacks_native_matmul(c10::ScalarType dtype) {
  static const SixteenBitMatmuls cpu = detect();
  if (!cpu.known) return false;
  if (dtype == c10::ScalarType::BFloat16) return !cpu.bfloat16;
  if (dtype == c10::ScalarType::Half) return !cpu.float16;
  return false;
}

std::string slow_cpu_matmul_warning(c10::ScalarType dtype) {
  const bool bfloat16 = dtype == c10::ScalarType::BFloat16;
  return std::string("dash: ") + (bfloat16 ? "bfloat16" : "float16") + " matmuls on a CPU without " +
         (bfloat16 ? "AVX512-BF16 or AMX-BF16" : "AVX512-FP16 or AMX-FP16") +
         " instructions: LibTorch may compute them far slower than float32 ones. Compare before using a 16-bit "
         "precision or preconditioning_precision here (dash-bench step --precisions fp32," +
         (bfloat16 ? "bf16" : "fp16") + ")";
}

}  // namespace dash::kernels
