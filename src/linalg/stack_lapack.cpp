#include "linalg/stack_lapack.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define DASH_HAVE_DLSYM 1
#endif

namespace dash::linalg {
namespace {

// OpenBLAS's threading controls, looked up at run time: LibTorch links OpenBLAS,
// MKL or Accelerate depending on the build, and only OpenBLAS exports these.
struct OpenBlasThreads {
  int (*get_parallel)() = nullptr;  // 0 sequential, 1 pthreads, 2 OpenMP
  int (*get_threads)() = nullptr;
  void (*set_threads)(int) = nullptr;

  static constexpr int kPthreads = 1;

  bool controllable() const {
    return get_parallel != nullptr && get_threads != nullptr && set_threads != nullptr && get_parallel() == kPthreads;
  }
};

const OpenBlasThreads& openblas() {
  static const OpenBlasThreads symbols = [] {
    OpenBlasThreads found;
#ifdef DASH_HAVE_DLSYM
    found.get_parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    found.get_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    found.set_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
#endif
    return found;
  }();
  return symbols;
}

// A helper thread's own OpenMP team size. ATen's parallel loops in a new thread
// open teams of ATen's thread count: T helpers × T threads on a T-core machine.
// Each helper does a range of matrices, so its copies run on its own core; the
// setting is per thread (OpenMP's nthreads ICV) and dies with the helper.
void single_threaded_aten_in_this_thread() {
#ifdef DASH_HAVE_DLSYM
  static const auto set_omp_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  at::internal::lazy_init_num_threads();  // ATen's first parallel loop would reset the team size
  if (set_omp_threads != nullptr) set_omp_threads(1);
#endif
}

// OpenBLAS's thread count is process-wide: two stacks split at once (two
// optimizers stepping in two threads) would restore each other's setting early.
std::mutex& blas_threads_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Sets OpenBLAS to one thread for its lifetime and restores the count it found.
class SingleThreadedBlas {
 public:
  explicit SingleThreadedBlas(int previous) : previous_(previous) { openblas().set_threads(1); }
  ~SingleThreadedBlas() { openblas().set_threads(previous_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

// Less work than this (≈ 0.1 ms on one core) is not worth starting a thread for.
constexpr double kFlopsPerWorker = 4e6;

int64_t workers_for(int64_t matrices, int blas_threads) {
  return std::max<int64_t>(1, std::min<int64_t>(matrices, blas_threads));
}

}  // namespace

StackLapackPlan stack_lapack_plan(int64_t matrices, const at::Device& device) {
  if (!device.is_cpu()) return {1, 1, "one call per stack (not a CPU tensor)"};
  const auto& blas = openblas();
  if (!blas.controllable()) return {1, 1, "one call per stack (the BLAS is not a pthreads OpenBLAS)"};
  const int threads = blas.get_threads();
  if (threads <= 1) return {1, 1, "one call per stack (OpenBLAS runs 1 thread)"};
  const auto workers = workers_for(matrices, threads);
  return {workers, threads,
      std::to_string(workers) + " ranges at once of " + std::to_string(threads) +
          " OpenBLAS threads, each single-threaded"};
}

void for_each_stack_range(
    const at::Tensor& stack, const std::function<void(int64_t first, int64_t last)>& solve, int64_t max_workers) {
  const int64_t count = stack.size(0);
  const auto& blas = openblas();
  if (count == 0 || !stack.device().is_cpu() || !blas.controllable()) return solve(0, count);

  std::lock_guard<std::mutex> lock(blas_threads_mutex());
  const int threads = blas.get_threads();
  if (threads <= 1) return solve(0, count);
  const SingleThreadedBlas single_threaded(threads);
  const auto workers = std::max<int64_t>(1, std::min(workers_for(count, threads), max_workers));
  const auto first_of = [&](int64_t worker) { return count * worker / workers; };

  const at::ThreadLocalState caller_state;
  std::vector<std::exception_ptr> failures(static_cast<size_t>(workers));
  const auto run = [&](int64_t worker) {
    try {
      const at::ThreadLocalStateGuard state_guard(caller_state);
      solve(first_of(worker), first_of(worker + 1));
    } catch (...) {
      failures[static_cast<size_t>(worker)] = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(workers - 1));
  int64_t started = 1;
  try {
    for (; started < workers; ++started) {
      helpers.emplace_back([&run, started] {
        single_threaded_aten_in_this_thread();  // a helper's setting, not the caller's
        run(started);
      });
    }
  } catch (...) {
    // No thread to be had (std::system_error, std::bad_alloc): the caller's thread
    // takes the ranges left over.
  }
  run(0);
  for (int64_t worker = started; worker < workers; ++worker) run(worker);
  for (auto& helper : helpers) helper.join();
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

namespace {

// `factorise(first, second, input)`, an ATen out= routine with two outputs, on
// every range of the stack, into the ranges of `first` and `second`.
template <typename Factorise>
void factorise_ranges(const at::Tensor& stack, const at::Tensor& first, const at::Tensor& second, Factorise factorise) {
  for_each_stack_range(stack, [&](int64_t begin, int64_t end) {
    auto first_range = first.slice(0, begin, end);
    auto second_range = second.slice(0, begin, end);
    factorise(first_range, second_range, stack.slice(0, begin, end));
  });
}

}  // namespace

at::Tensor stack_eigh(const at::Tensor& stack, const at::Tensor& vectors) {
  auto values = at::empty({stack.size(0), stack.size(-1)}, stack.options());
  factorise_ranges(
      stack, values, vectors, [](at::Tensor& range_values, at::Tensor& range_vectors, const at::Tensor& range) {
        at::linalg_eigh_out(range_values, range_vectors, range);
      });
  return values;
}

at::Tensor column_major_view(const at::Tensor& buffer) { return buffer.transpose(-2, -1); }

at::Tensor& stack_bmm_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && a.size(0) == out.size(0) && b.size(0) == out.size(0) &&
                  a.size(2) == b.size(1) && out.size(1) == a.size(1) && out.size(2) == b.size(2),
      "dash: stack_bmm_out: ", a.sizes(), " @ ", b.sizes(), " does not fit ", out.sizes());
  const auto plan = stack_lapack_plan(out.size(0), out.device());
  const double flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.size(2));
  if (plan.workers <= 1 || plan.workers < plan.blas_threads || flops < kFlopsPerWorker * plan.workers) {
    return at::bmm_out(out, a, b);
  }
  for_each_stack_range(out, [&](int64_t first, int64_t last) {
    auto range = out.slice(0, first, last);
    at::bmm_out(range, a.slice(0, first, last), b.slice(0, first, last));
  });
  return out;
}

namespace {

// CBLAS's syrk, looked up at run time like OpenBLAS's thread controls. Its integer
// arguments are `int` unless OpenBLAS was built with 64-bit integers (Debian's
// libopenblas64 packages), which its configuration string names: then it is not used.
template <typename Scalar>
using CblasSyrk = void (*)(int order, int uplo, int trans, int n, int k, Scalar alpha, const Scalar* a, int lda,
    Scalar beta, Scalar* c, int ldc);

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;
constexpr int kCblasLower = 122;

struct CblasSyrks {
  CblasSyrk<float> single_precision = nullptr;
  CblasSyrk<double> double_precision = nullptr;
};

const CblasSyrks& cblas_syrks() {
  static const CblasSyrks symbols = [] {
    CblasSyrks found;
#ifdef DASH_HAVE_DLSYM
    const auto config = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    if (config == nullptr || std::strstr(config(), "USE64BITINT") != nullptr) return found;
    // From OpenBLAS's own library: a CBLAS of another library loaded earlier
    // (MKL, say) could come first in the global scope.
    Dl_info library{};
    if (dladdr(reinterpret_cast<void*>(config), &library) == 0 || library.dli_fname == nullptr) return found;
    void* openblas_library = dlopen(library.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (openblas_library == nullptr) return found;
    found.single_precision = reinterpret_cast<CblasSyrk<float>>(dlsym(openblas_library, "cblas_ssyrk"));
    found.double_precision = reinterpret_cast<CblasSyrk<double>>(dlsym(openblas_library, "cblas_dsyrk"));
#endif
    return found;
  }();
  return symbols;
}

bool syrk_found(at::ScalarType dtype) {
  const auto& syrks = cblas_syrks();
  return dtype == at::kFloat ? syrks.single_precision != nullptr
                             : dtype == at::kDouble && syrks.double_precision != nullptr;
}

// What stack_syrk_plan() spells out: a CPU stack, an OpenBLAS the split controls, its syrk.
bool syrk_runs_on(const at::Device& device, at::ScalarType dtype) {
  return device.is_cpu() && openblas().controllable() && syrk_found(dtype);
}

// Copies the lower triangle of a row-major n × n matrix into its upper one, in
// tiles, so that both the rows read and the rows written stay in cache.
template <typename Scalar>
void mirror_lower_triangle(Scalar* c, int64_t n, int64_t ldc) {
  constexpr int64_t kTile = 32;
  for (int64_t row0 = 0; row0 < n; row0 += kTile) {
    for (int64_t col0 = row0; col0 < n; col0 += kTile) {
      for (int64_t row = row0; row < std::min(row0 + kTile, n); ++row) {
        for (int64_t col = std::max(col0, row + 1); col < std::min(col0 + kTile, n); ++col) {
          c[row * ldc + col] = c[col * ldc + row];
        }
      }
    }
  }
}

template <typename Scalar>
void syrk_range(const at::Tensor& c, const at::Tensor& a, bool transpose_a, double alpha, double beta, int64_t first,
    int64_t last, CblasSyrk<Scalar> syrk) {
  const auto n = static_cast<int>(c.size(1));
  const auto k = static_cast<int>(transpose_a ? a.size(1) : a.size(2));
  for (int64_t i = first; i < last; ++i) {
    auto* out = c.data_ptr<Scalar>() + i * c.stride(0);
    const auto* in = a.data_ptr<Scalar>() + i * a.stride(0);
    if (beta == 0.0) {
      // BLAS may scale C by β before it adds: 0 · NaN would keep a NaN.
      for (int64_t row = 0; row < n; ++row) std::fill_n(out + row * c.stride(1), n, Scalar(0));
    }
    syrk(kCblasRowMajor, kCblasLower, transpose_a ? kCblasTrans : kCblasNoTrans, n, k, static_cast<Scalar>(alpha), in,
        static_cast<int>(a.stride(1)), static_cast<Scalar>(beta), out, static_cast<int>(c.stride(1)));
    mirror_lower_triangle(out, n, c.stride(1));
  }
}

}  // namespace

bool stack_syrk_supported(const at::Tensor& c, const at::Tensor& a) {
  if (c.device() != a.device() || c.scalar_type() != a.scalar_type() || !syrk_runs_on(c.device(), c.scalar_type()) ||
      c.dim() != 3 || a.dim() != 3) {
    return false;
  }
  constexpr auto kIntMax = static_cast<int64_t>(std::numeric_limits<int>::max());
  // C's matrices are written: they must not overlap (an expanded stack would),
  // nor share storage with A.
  const bool distinct = (c.size(0) <= 1 || c.stride(0) >= c.size(1) * c.stride(1)) && !c.is_alias_of(a);
  return c.size(1) == c.size(2) && c.stride(2) == 1 && a.stride(2) == 1 && c.size(0) == a.size(0) && distinct &&
         c.stride(1) >= std::max<int64_t>(1, c.size(1)) && a.stride(1) >= std::max<int64_t>(1, a.size(2)) &&
         c.stride(1) <= kIntMax && a.stride(1) <= kIntMax && a.size(1) <= kIntMax && a.size(2) <= kIntMax;
}

void stack_syrk(const at::Tensor& c, const at::Tensor& a, bool transpose_a, double alpha, double beta) {
  TORCH_CHECK(stack_syrk_supported(c, a), "dash: stack_syrk cannot take stacks of ", c.sizes(), " (", c.scalar_type(),
      ", ", c.device(), ") and ", a.sizes(), " (", a.scalar_type(), ", ", a.device(), ")");
  TORCH_CHECK(c.size(1) == (transpose_a ? a.size(2) : a.size(1)), "dash: stack_syrk: C of ", c.sizes(),
      " does not fit A", transpose_a ? "ᵀA" : "Aᵀ", " for A of ", a.sizes());
  const double n = static_cast<double>(c.size(1));
  const double k = static_cast<double>(transpose_a ? a.size(1) : a.size(2));
  const double flops = static_cast<double>(c.size(0)) * n * (n + 1.0) * k;
  for_each_stack_range(
      c,
      [&](int64_t first, int64_t last) {
        if (c.scalar_type() == at::kFloat) {
          syrk_range<float>(c, a, transpose_a, alpha, beta, first, last, cblas_syrks().single_precision);
        } else {
          syrk_range<double>(c, a, transpose_a, alpha, beta, first, last, cblas_syrks().double_precision);
        }
      },
      static_cast<int64_t>(flops / kFlopsPerWorker));
}

StackSyrkPlan stack_syrk_plan(const at::Device& device) {
  if (!device.is_cpu()) return {false, "one GEMM per stack (not a CPU tensor)"};
  if (!openblas().controllable()) return {false, "one GEMM per stack (the BLAS is not a pthreads OpenBLAS)"};
  if (!syrk_found(at::kFloat)) return {false, "one GEMM per stack (no 32-bit-integer cblas_ssyrk found)"};
  return {true, "syrk on the lower triangle, mirrored, over the stack's ranges"};
}

std::tuple<at::Tensor, at::Tensor> stack_qr(const at::Tensor& stack) {
  // Both column-major, as LAPACK writes them: no temporaries, no copies.
  auto q = column_major_view(at::empty_like(stack, at::MemoryFormat::Contiguous));
  auto r = column_major_view(at::empty_like(stack, at::MemoryFormat::Contiguous));
  factorise_ranges(stack, q, r, [](at::Tensor& range_q, at::Tensor& range_r, const at::Tensor& range) {
    at::linalg_qr_out(range_q, range_r, range);
  });
  return {q, r};
}

}  // namespace dash::linalg
