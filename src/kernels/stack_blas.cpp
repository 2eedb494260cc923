#include "kernels/stack_blas.h"

#include "kernels/cpu_features.h"
#include "kernels/matrix_stack.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define DASH_HAVE_DLSYM 1
#endif

namespace dash::kernels {

namespace {

// Below this many multiply-adds per matrix, out is zeroed before a β = 0
// baddbmm_ off CUDA: LibTorch's CPU backend computes products under 400
// multiply-adds in a plain loop that multiplies out by β even when β = 0
// (0 · NaN = NaN), where BLAS and cuBLAS do not read it. The margin keeps other
// versions' cut-offs covered; at that size the zeroing costs nothing.
constexpr int64_t kSmallProduct = 32 * 32 * 32;

// Whether one call is as good as the split: it has too little work to split, or
// it uses the cores already. OpenBLAS's threads do the float32 and float64
// products (a stack of fewer matrices than threads is better left to them),
// ATen's intra-op pool the 16-bit ones (oneDNN): a pool of several threads is
// left to it, as splitting it would put several threads on one range's core.
bool one_call_suffices(const at::Tensor& out, const at::Tensor& a, const StackLapackPlan& plan) {
  const double flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.size(2));
  if (plan.workers <= 1 || flops < kMinFlopsPerRange * static_cast<double>(plan.workers)) return true;
  const bool blas = out.scalar_type() == at::kFloat || out.scalar_type() == at::kDouble;
  return blas ? plan.workers < plan.blas_threads : at::get_num_threads() > 1;
}

}  // namespace

void bmm_out_scaled(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha) {
  if (alpha == 1.0) {
    at::bmm_out(out, a, b);
    return;
  }
  if (!out.is_cuda() && a.size(1) * a.size(2) * b.size(2) < kSmallProduct) out.zero_();
  out.baddbmm_(a, b, /*beta=*/0.0, alpha);
}

at::Tensor& stack_bmm_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha) {
  TORCH_CHECK(out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && a.size(0) == out.size(0) && b.size(0) == out.size(0) &&
                  a.size(2) == b.size(1) && out.size(1) == a.size(1) && out.size(2) == b.size(2),
      "dash: stack_bmm_out: ", a.sizes(), " @ ", b.sizes(), " does not fit ", out.sizes());
  if (out.is_cpu() && cpu_lacks_native_matmul(out.scalar_type())) {
    TORCH_WARN_ONCE(slow_cpu_matmul_warning(out.scalar_type()));
  }
  if (one_call_suffices(out, a, stack_lapack_plan(out.size(0), out.device()))) {
    bmm_out_scaled(out, a, b, alpha);
    return out;
  }
  for_each_stack_range(out, [&](int64_t first, int64_t last) {
    auto range = out.slice(0, first, last);
    bmm_out_scaled(range, a.slice(0, first, last), b.slice(0, first, last), alpha);
  });
  return out;
}

namespace {

// CBLAS's syrk and gemm, looked up at run time like OpenBLAS's thread controls
// (core_ranges.cpp). Their integer arguments are `int` unless OpenBLAS was built
// with 64-bit integers (Debian's libopenblas64 packages), which its configuration
// string names: then they are not used.
template <typename Scalar>
using CblasSyrk = void (*)(int order, int uplo, int trans, int n, int k, Scalar alpha, const Scalar* a, int lda,
    Scalar beta, Scalar* c, int ldc);
template <typename Scalar>
using CblasGemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, Scalar alpha, const Scalar* a,
    int lda, const Scalar* b, int ldb, Scalar beta, Scalar* c, int ldc);

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;
constexpr int kCblasLower = 122;

// One precision's routines; nullptr where OpenBLAS does not export them.
template <typename Scalar>
struct CblasRoutines {
  CblasSyrk<Scalar> syrk = nullptr;
  CblasGemm<Scalar> gemm = nullptr;
};
using Cblas = std::tuple<CblasRoutines<float>, CblasRoutines<double>>;

const Cblas& cblas() {
  static const Cblas symbols = [] {
    Cblas found;
#ifdef DASH_HAVE_DLSYM
    const auto config = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    if (config == nullptr || std::strstr(config(), "USE64BITINT") != nullptr) return found;
    // From OpenBLAS's own library: a CBLAS of another library loaded earlier
    // (MKL, say) could come first in the global scope.
    Dl_info library{};
    if (dladdr(reinterpret_cast<void*>(config), &library) == 0 || library.dli_fname == nullptr) return found;
    void* openblas_library = dlopen(library.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (openblas_library == nullptr) return found;
    auto& [single, twice] = found;
    single.syrk = reinterpret_cast<CblasSyrk<float>>(dlsym(openblas_library, "cblas_ssyrk"));
    single.gemm = reinterpret_cast<CblasGemm<float>>(dlsym(openblas_library, "cblas_sgemm"));
    twice.syrk = reinterpret_cast<CblasSyrk<double>>(dlsym(openblas_library, "cblas_dsyrk"));
    twice.gemm = reinterpret_cast<CblasGemm<double>>(dlsym(openblas_library, "cblas_dgemm"));
#endif
    return found;
  }();
  return symbols;
}

template <typename Scalar>
const CblasRoutines<Scalar>& cblas_for() {
  return std::get<CblasRoutines<Scalar>>(cblas());
}

enum class Routine { Syrk, Gemm };

template <typename Scalar>
bool found_for(Routine routine) {
  const auto& blas = cblas_for<Scalar>();
  return routine == Routine::Syrk ? blas.syrk != nullptr : blas.gemm != nullptr;
}

bool found(Routine routine, at::ScalarType dtype) {
  return dtype == at::kFloat ? found_for<float>(routine) : dtype == at::kDouble && found_for<double>(routine);
}

// What the plans spell out: a CPU stack, an OpenBLAS the split controls, the routine.
bool runs_on(Routine routine, const at::Device& device, at::ScalarType dtype) {
  return device.is_cpu() && blas_threads_controllable() && found(routine, dtype);
}

TrianglePlan plan_for(Routine routine, const at::Device& device, const char* one_triangle) {
  const char* symbol = routine == Routine::Syrk ? "cblas_ssyrk" : "cblas_sgemm";
  if (!device.is_cpu()) return {false, "one GEMM per stack (not a CPU tensor)"};
  if (!blas_threads_controllable()) return {false, "one GEMM per stack (the BLAS is not a pthreads OpenBLAS)"};
  if (!found(routine, at::kFloat)) {
    return {false, std::string("one GEMM per stack (no 32-bit-integer ") + symbol + " found)"};
  }
  return {true, one_triangle};
}

constexpr auto kIntMax = static_cast<int64_t>(std::numeric_limits<int>::max());

// C's matrices are written: they must have unit column stride and `int` sizes, and
// must not overlap (an expanded stack would); readable_stack() keeps them apart from
// the inputs.
bool writable_stack(const at::Tensor& c) {
  return c.layout() == at::kStrided && c.dim() == 3 && c.stride(2) == 1 &&
         (c.size(0) <= 1 || c.stride(0) >= c.size(1) * c.stride(1)) && c.stride(1) >= std::max<int64_t>(1, c.size(2)) &&
         c.stride(1) <= kIntMax && c.size(1) <= kIntMax && c.size(2) <= kIntMax;
}

bool writable_square_stack(const at::Tensor& c) { return writable_stack(c) && c.size(1) == c.size(2); }

// An input stack BLAS reads row-major with `int` dimensions.
bool readable_stack(const at::Tensor& t, const at::Tensor& c) {
  return t.layout() == at::kStrided && t.dim() == 3 && t.device() == c.device() && t.scalar_type() == c.scalar_type() &&
         t.size(0) == c.size(0) && t.stride(2) == 1 && t.stride(1) >= std::max<int64_t>(1, t.size(2)) &&
         t.stride(1) <= kIntMax && t.size(1) <= kIntMax && t.size(2) <= kIntMax && !c.is_alias_of(t);
}

// Copies columns [first, last) of the strictly lower triangle of a row-major n × n
// matrix into rows [first, last) of the upper one: C[col][row] = C[row][col] for
// first ≤ col < last, row > col. It goes tile by tile through a buffer in the
// first-level cache, so that C is read and written along rows only: transposing in
// place wrote 32 rows at once, which at n = 512 or 1024 (a power-of-two stride)
// fall into a few cache sets and evict each other (docs/experiments/2026-12-03-step-floor.md, "The
// mirror at power-of-two sizes").
template <typename Scalar>
void mirror_columns(Scalar* c, int64_t n, int64_t ldc, int64_t first, int64_t last) {
  constexpr int64_t kTile = 32;
  Scalar transposed[kTile * kTile];
  for (int64_t col0 = first; col0 < last; col0 += kTile) {
    const int64_t columns = std::min(kTile, last - col0);
    for (int64_t row0 = col0; row0 < n; row0 += kTile) {
      const int64_t rows = std::min(kTile, n - row0);
      // The tile on the diagonal holds upper entries too: only those below it are read.
      const bool diagonal = row0 == col0;
      for (int64_t row = 0; row < rows; ++row) {
        const Scalar* source = c + (row0 + row) * ldc + col0;
        const int64_t below = diagonal ? std::min(columns, row) : columns;
        for (int64_t col = 0; col < below; ++col) transposed[col * kTile + row] = source[col];
      }
      for (int64_t col = 0; col < columns; ++col) {
        const int64_t from = diagonal ? col + 1 : 0;
        if (from < rows) {
          std::copy(
              transposed + col * kTile + from, transposed + col * kTile + rows, c + (col0 + col) * ldc + row0 + from);
        }
      }
    }
  }
}

template <typename Scalar>
void syrk_range(const MatrixStack<Scalar>& c, const MatrixStack<const Scalar>& a, int64_t n, int64_t k,
    bool transpose_a, double alpha, double beta, int64_t first, int64_t last) {
  const auto syrk = cblas_for<Scalar>().syrk;
  for (int64_t i = first; i < last; ++i) {
    auto* out = c.matrix(i);
    if (beta == 0.0) {
      // BLAS may scale C by β before it adds: 0 · NaN would keep a NaN.
      for (int64_t row = 0; row < n; ++row) std::fill_n(out + row * c.ld, n, Scalar(0));
    }
    syrk(kCblasRowMajor, kCblasLower, transpose_a ? kCblasTrans : kCblasNoTrans, static_cast<int>(n),
        static_cast<int>(k), static_cast<Scalar>(alpha), a.matrix(i), static_cast<int>(a.ld), static_cast<Scalar>(beta),
        out, static_cast<int>(c.ld));
    mirror_columns(out, n, c.ld, 0, n);
  }
}

// Column panels of the lower triangle. Narrow panels waste less of the upper
// triangle but run GEMMs of lower efficiency: on this project's CPU (one core,
// OpenBLAS 0.3.21) a panel of n/8 columns rounded up to a multiple of 16, 32 to
// 128, was within 3 % of the fastest width for n = 128…1024 (0.62–0.66 of a full
// GEMM's time).
struct Panel {
  int64_t first;
  int64_t width;
};

int64_t panel_width(int64_t n) {
  const int64_t eighth = (n / 8 + 15) / 16 * 16;
  return std::min(n, std::clamp<int64_t>(eighth, 32, 128));
}

// The panels in the order the work items take them: the widest GEMM (the first
// panel) next to the narrowest, so that contiguous ranges of one matrix's panels
// carry about equal work.
std::vector<Panel> balanced_panels(int64_t n) {
  std::vector<Panel> panels;
  const int64_t width = std::max<int64_t>(1, panel_width(n));
  for (int64_t first = 0; first < n; first += width) panels.push_back({first, std::min(width, n - first)});
  std::vector<Panel> order;
  for (size_t low = 0, high = panels.size(); low < high;) {
    order.push_back(panels[low++]);
    if (low < high) order.push_back(panels[--high]);
  }
  return order;
}

// Rows of C per GEMM of stack_gemm(): on this project's CPU (one core, OpenBLAS
// 0.3.21) a block of 128 rows ran as fast as the whole 256² or 512² product.
constexpr int64_t kGemmRows = 128;

// The operands of stack_gemm() and stack_symmetric_product(), as read on the
// caller's thread: C ← β C + α A B, with C m × n and k the inner size.
template <typename Scalar>
struct ProductOperands {
  MatrixStack<Scalar> c;
  MatrixStack<const Scalar> a;
  MatrixStack<const Scalar> b;
  int64_t m, n, k;
  Scalar alpha, beta;
};

template <typename Scalar>
ProductOperands<Scalar> product_operands(
    const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta) {
  return {writable_view<Scalar>(c), readable_view<Scalar>(a), readable_view<Scalar>(b), c.size(1), c.size(2), a.size(2),
      static_cast<Scalar>(alpha), static_cast<Scalar>(beta)};
}

// C[row:row+rows, col:col+cols] = β C[…] + α A[row:row+rows, :] B[:, col:col+cols], for
// one matrix of the stacks. (BLAS does not read C when β = 0.)
template <typename Scalar>
void gemm_block(
    const ProductOperands<Scalar>& p, int64_t matrix, int64_t row, int64_t col, int64_t rows, int64_t cols) {
  cblas_for<Scalar>().gemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans, static_cast<int>(rows), static_cast<int>(cols),
      static_cast<int>(p.k), p.alpha, p.a.matrix(matrix) + row * p.a.ld, static_cast<int>(p.a.ld),
      p.b.matrix(matrix) + col, static_cast<int>(p.b.ld), p.beta, p.c.matrix(matrix) + row * p.c.ld + col,
      static_cast<int>(p.c.ld));
}

template <typename Scalar>
void gemm_items(const ProductOperands<Scalar>& p, int64_t blocks, int64_t first, int64_t last) {
  for (int64_t item = first; item < last; ++item) {
    const int64_t row = item % blocks * kGemmRows;
    gemm_block(p, item / blocks, row, 0, std::min(kGemmRows, p.m - row), p.n);
  }
}

template <typename Scalar>
void symmetric_product_items(
    const ProductOperands<Scalar>& p, const std::vector<Panel>& panels, int64_t first, int64_t last) {
  const int64_t count = static_cast<int64_t>(panels.size());
  for (int64_t item = first; item < last; ++item) {
    const int64_t matrix = item / count;
    const auto& panel = panels[static_cast<size_t>(item % count)];
    // The panel's part of the lower triangle, C[j:, j:j+w], then its mirror.
    gemm_block(p, matrix, panel.first, panel.first, p.n - panel.first, panel.width);
    mirror_columns(p.c.matrix(matrix), p.n, p.c.ld, panel.first, panel.first + panel.width);
  }
}

// Splits `items` work items over for_each_range(), no more ranges than `flops` pays
// threads for. `ranges_for(Scalar{})`, called on the caller's thread with Scalar the
// C++ type of C's dtype (float or double), returns what runs a range:
// (first, last) → void.
template <typename RangesFor>
void split_by_dtype(const at::Tensor& c, int64_t items, double flops, const RangesFor& ranges_for) {
  const auto max_workers = static_cast<int64_t>(flops / kMinFlopsPerRange);
  if (c.scalar_type() == at::kFloat) {
    for_each_range(items, c.device(), ranges_for(float{}), max_workers);
  } else {
    for_each_range(items, c.device(), ranges_for(double{}), max_workers);
  }
}

// "sizes (dtype, device)", for the refusals' messages.
std::string describe(const at::Tensor& t) {
  std::ostringstream text;
  text << t.sizes() << " (" << t.scalar_type() << ", " << t.device() << ")";
  return text.str();
}

}  // namespace

bool stack_gemm_supported(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  return runs_on(Routine::Gemm, c.device(), c.scalar_type()) && writable_stack(c) && readable_stack(a, c) &&
         readable_stack(b, c) && a.size(1) == c.size(1) && b.size(2) == c.size(2) && a.size(2) == b.size(1);
}

void stack_gemm(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta) {
  TORCH_CHECK(stack_gemm_supported(c, a, b), "dash: stack_gemm cannot take stacks of ", describe(c), ", ", describe(a),
      " and ", describe(b));
  RECORD_FUNCTION("dash::gemm", std::vector<c10::IValue>({c, a, b}));
  const int64_t blocks = std::max<int64_t>(1, (c.size(1) + kGemmRows - 1) / kGemmRows);
  const double flops = 2.0 * static_cast<double>(c.numel()) * static_cast<double>(a.size(2));
  split_by_dtype(c, c.size(0) * blocks, flops, [&](auto zero) {
    return [operands = product_operands<decltype(zero)>(c, a, b, alpha, beta), blocks](
               int64_t first, int64_t last) { gemm_items(operands, blocks, first, last); };
  });
}

bool stack_syrk_supported(const at::Tensor& c, const at::Tensor& a) {
  return runs_on(Routine::Syrk, c.device(), c.scalar_type()) && writable_square_stack(c) && readable_stack(a, c);
}

void stack_syrk(const at::Tensor& c, const at::Tensor& a, bool transpose_a, double alpha, double beta) {
  TORCH_CHECK(stack_syrk_supported(c, a), "dash: stack_syrk cannot take stacks of ", describe(c), " and ", describe(a));
  TORCH_CHECK(c.size(1) == (transpose_a ? a.size(2) : a.size(1)), "dash: stack_syrk: C of ", c.sizes(),
      " does not fit A", transpose_a ? "ᵀA" : "Aᵀ", " for A of ", a.sizes());
  const int64_t n = c.size(1);
  const int64_t k = transpose_a ? a.size(1) : a.size(2);
  const double flops =
      static_cast<double>(c.size(0)) * static_cast<double>(n) * (static_cast<double>(n) + 1.0) * static_cast<double>(k);
  split_by_dtype(c, c.size(0), flops, [&](auto zero) {
    using Scalar = decltype(zero);
    return [out = writable_view<Scalar>(c), in = readable_view<Scalar>(a), n, k, transpose_a, alpha, beta](
               int64_t first, int64_t last) { syrk_range(out, in, n, k, transpose_a, alpha, beta, first, last); };
  });
}

bool stack_symmetric_product_supported(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  return runs_on(Routine::Gemm, c.device(), c.scalar_type()) && writable_square_stack(c) && readable_stack(a, c) &&
         readable_stack(b, c) && a.size(1) == c.size(1) && a.size(2) == c.size(1) && b.size(1) == c.size(1) &&
         b.size(2) == c.size(1);
}

void stack_symmetric_product(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double alpha, double beta) {
  TORCH_CHECK(stack_symmetric_product_supported(c, a, b), "dash: stack_symmetric_product cannot take stacks of ",
      describe(c), ", ", describe(a), " and ", describe(b));
  // Visible to profilers and to tests that count the solvers' matmuls, as a bmm is.
  RECORD_FUNCTION("dash::symmetric_product", std::vector<c10::IValue>({c, a, b}));
  const auto panels = balanced_panels(c.size(1));
  const double flops = static_cast<double>(c.size(0)) * symmetric_product_flops(c.size(1));
  split_by_dtype(c, c.size(0) * static_cast<int64_t>(panels.size()), flops, [&](auto zero) {
    return [operands = product_operands<decltype(zero)>(c, a, b, alpha, beta), &panels](
               int64_t first, int64_t last) { symmetric_product_items(operands, panels, first, last); };
  });
}

double symmetric_product_flops(int64_t n) {
  const int64_t width = std::max<int64_t>(1, panel_width(n));
  double flops = 0.0;
  for (int64_t first = 0; first < n; first += width) {
    flops +=
        2.0 * static_cast<double>(n - first) * static_cast<double>(std::min(width, n - first)) * static_cast<double>(n);
  }
  return flops;
}

TrianglePlan stack_syrk_plan(const at::Device& device) {
  return plan_for(Routine::Syrk, device, "syrk on the lower triangle, mirrored, over the stack's ranges");
}

TrianglePlan stack_symmetric_product_plan(const at::Device& device) {
  return plan_for(
      Routine::Gemm, device, "GEMMs on column panels of the lower triangle, mirrored, over the stack's ranges");
}

}  // namespace dash::kernels
