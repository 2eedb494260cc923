#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#include <pthread.h>
#define DASH_HAVE_DLSYM 1
#endif

namespace dash::kernels {
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

// Sets this thread's floating-point environment for its lifetime, then restores it.
class FloatingPointEnvironment {
 public:
  explicit FloatingPointEnvironment(const std::fenv_t& environment) {
    std::fegetenv(&previous_);
    std::fesetenv(&environment);
  }
  ~FloatingPointEnvironment() { std::fesetenv(&previous_); }
  FloatingPointEnvironment(const FloatingPointEnvironment&) = delete;
  FloatingPointEnvironment& operator=(const FloatingPointEnvironment&) = delete;

 private:
  std::fenv_t previous_;
};

int64_t workers_for(int64_t matrices, int blas_threads) {
  return std::max<int64_t>(1, std::min<int64_t>(matrices, blas_threads));
}

// Helper threads kept from one split to the next: starting and joining a thread
// took ≈ 40 µs here, and a step within a workspace limit splits a few hundred
// passes. One job at a time: for_each_range() holds blas_threads_mutex() around it.
// Between jobs a helper spins briefly (a step's splits come back to back), then
// sleeps on a condition variable, so that an idle pool takes no core from
// anything else (OpenBLAS's own threads outside the splits).
class HelperPool {
 public:
  /// Runs task(w) for w in [0, workers): w = 0 on the caller's thread, the others
  /// on helpers (those a thread could not be started for on the caller's, after
  /// its own); returns once all have returned. `task` must not throw.
  void run(int64_t workers, const std::function<void(int64_t)>& task) {
    try {
      while (static_cast<int64_t>(threads_.size()) < workers - 1) {
        const auto index = static_cast<int64_t>(threads_.size()) + 1;
        threads_.emplace_back([this, index] { serve(index); });
      }
    } catch (...) {
      // No thread to be had (std::system_error, std::bad_alloc): fewer helpers.
    }
    const int64_t helped = std::min(workers, static_cast<int64_t>(threads_.size()) + 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      workers_ = helped;
      running_.store(helped - 1);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    task(0);
    for (int64_t worker = helped; worker < workers; ++worker) task(worker);
    spin_while([&] { return running_.load() > 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return running_.load() == 0; });
    task_ = nullptr;
  }

 private:
  // How long a thread yields in a loop for the other side before it sleeps.
  static constexpr std::chrono::microseconds kSpin{100};

  template <typename Waiting>
  static void spin_while(const Waiting& waiting) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (waiting() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }

  void serve(int64_t index) {
    single_threaded_aten_in_this_thread();  // a helper's setting, not the caller's
    uint64_t seen = 0;
    for (;;) {
      spin_while([&] { return generation_.load() == seen; });
      const std::function<void(int64_t)>* task = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        seen = generation_.load();
        if (index >= workers_) continue;
        task = task_;
      }
      (*task)(index);
      if (running_.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller sees the count under the lock, or is woken
        finished_.notify_one();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable finished_;
  std::vector<std::thread> threads_;  // thread k - 1 serves worker k; touched by callers only
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t workers_ = 0;
  std::atomic<int64_t> running_{0};
  std::atomic<uint64_t> generation_{0};
};

// The process's pool, never destroyed (its threads wait until the process ends),
// made by the first split (under blas_threads_mutex()). A child of fork() has none
// of its parent's threads: it makes a pool of its own (the parent's is leaked there).
HelperPool*& helper_pool_slot() {
  static HelperPool* pool = nullptr;
  return pool;
}

HelperPool& helper_pool() {
  static std::once_flag registered;
  std::call_once(registered, [] {
#ifdef DASH_HAVE_DLSYM
    pthread_atfork(nullptr, nullptr, [] { helper_pool_slot() = nullptr; });
#endif
  });
  auto& pool = helper_pool_slot();
  if (pool == nullptr) pool = new HelperPool;
  return *pool;
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

bool blas_threads_controllable() { return openblas().controllable(); }

void for_each_stack_range(
    const at::Tensor& stack, const std::function<void(int64_t first, int64_t last)>& solve, int64_t max_workers) {
  for_each_range(stack.size(0), stack.device(), solve, max_workers);
}

void for_each_pass_range(
    const at::Tensor& stack, double bytes, const std::function<void(int64_t first, int64_t last)>& pass) {
  TORCH_CHECK(stack.dim() >= 1, "dash: for_each_pass_range: expected a stack of matrices, got a 0-d tensor");
  for_each_pass_range(stack.size(0), stack.device(), bytes, pass);
}

void for_each_pass_range(int64_t count, const at::Device& device, double bytes,
    const std::function<void(int64_t first, int64_t last)>& pass) {
  const auto max_ranges = std::max<int64_t>(1, static_cast<int64_t>(bytes / kMinBytesPerRange));
  if (!device.is_cpu() || count <= 1 || max_ranges <= 1) return pass(0, count);
  if (at::get_num_threads() > 1) {
    // ATen's pool: ranges of whole matrices on its threads (ATen ops inside one run
    // on that thread alone, as in any parallel region).
    at::parallel_for(0, count, (count + max_ranges - 1) / max_ranges, pass);
    return;
  }
  // One range needs no thread, nor for_each_range()'s lock and BLAS setting.
  if (std::min(stack_lapack_plan(count, device).workers, max_ranges) <= 1) return pass(0, count);
  for_each_range(count, device, pass, max_ranges);
}

void copy_over_cores(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.dim() == 0) {
    dst.copy_(src);
    return;
  }
  (void)dst.data_ptr();  // on this thread (for_each_pass_range)
  const auto bytes = static_cast<double>(dst.numel() * (dst.element_size() + src.element_size()));
  for_each_pass_range(
      dst, bytes, [&](int64_t first, int64_t last) { dst.slice(0, first, last).copy_(src.slice(0, first, last)); });
}

void for_each_range(int64_t count, const at::Device& device,
    const std::function<void(int64_t first, int64_t last)>& solve, int64_t max_workers) {
  const auto& blas = openblas();
  if (count == 0 || !device.is_cpu() || !blas.controllable()) return solve(0, count);

  std::lock_guard<std::mutex> lock(blas_threads_mutex());
  const int threads = blas.get_threads();
  if (threads <= 1) return solve(0, count);
  const SingleThreadedBlas single_threaded(threads);
  const auto workers = std::max<int64_t>(1, std::min(workers_for(count, threads), max_workers));
  const auto first_of = [&](int64_t worker) { return count * worker / workers; };

  const at::ThreadLocalState caller_state;
  // The caller's floating-point environment (rounding, flush-to-zero: x86's MXCSR
  // is part of it), which a helper kept from an earlier split may not have.
  std::fenv_t caller_environment;
  std::fegetenv(&caller_environment);
  std::vector<std::exception_ptr> failures(static_cast<size_t>(workers));
  const auto run = [&](int64_t worker) {
    try {
      const at::ThreadLocalStateGuard state_guard(caller_state);
      const FloatingPointEnvironment environment(caller_environment);
      solve(first_of(worker), first_of(worker + 1));
    } catch (...) {
      failures[static_cast<size_t>(worker)] = std::current_exception();
    }
  };
  helper_pool().run(workers, run);
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace dash::kernels
