#pragma once

// The CPU's cores as ranges of work: a stack's matrices (or any count of items) cut
// into contiguous ranges, one per core, each on its own thread with a
// single-threaded BLAS (LAPACK and BLAS over a stack, stack_lapack.h and
// stack_blas.h) or, for memory-bound passes, on ATen's pool or these threads
// (for_each_pass_range: the library's parallel for, device-neutral: elsewhere than
// on a CPU it runs the whole range on the caller's thread, where ATen's ops queue
// the device's kernels).
//
// A LAPACK call on one b × b matrix (b ≤ 1024) gains little or nothing from a
// second BLAS thread: eigh's reduction to tridiagonal form is matrix–vector work,
// and the threads mostly wait for each other. A stack's independent matrices are
// the parallelism a CPU can use (a per-block loop, as in Distributed Shampoo, has
// none): split over the cores, a root step of many eighs runs several times faster
// than with OpenBLAS's own threads (docs/experiments/2026-12-03-step-floor.md, "eigh across the
// cores").
//
// Every matrix is solved with a single-threaded BLAS whenever the split is on, a
// stack of one included, so that a matrix's result does not depend on the stack
// it is in (batched and per-block roots stay equal bit for bit). The price: a
// stack of fewer matrices than cores uses fewer cores (one large matrix, b ≥ 2048,
// one core instead of all).
//
// The BLAS thread count is process-wide: while a stack is split, other threads of
// the process get a single-threaded OpenBLAS too, and two splits run one after
// the other (a mutex), not at once.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

namespace dash::kernels {

/// How this process runs a stack's LAPACK work: `workers` ranges at once (1: one
/// call on the whole stack, with the BLAS's own threads), and why, in words.
struct StackLapackPlan {
  int64_t workers = 1;
  int64_t blas_threads = 1;  ///< the BLAS's own thread count where the split can control it, else 1
  std::string description;
};

/// The plan for a stack of `matrices` on `device`. The split needs a CPU tensor and
/// a pthreads OpenBLAS (Debian's LibTorch) configured for more than
/// one thread: its thread count, read at call time, is the number of cores it
/// would use, and each of min(matrices, threads) workers takes one of them. Other
/// BLAS libraries (MKL, Accelerate, an OpenMP OpenBLAS, whose thread setting is
/// OpenMP's, which ATen shares) cannot be made single-threaded for one call
/// without side effects, so they keep one call.
StackLapackPlan stack_lapack_plan(int64_t matrices, const at::Device& device);

/// Runs `solve(first, last)` over ranges [first, last) that cover [0, stack.size(0))
/// once, as stack_lapack_plan() says: min(N, threads) contiguous ranges at once,
/// each on its own thread (the caller's thread takes the first; the others are
/// helpers kept between calls) with the caller's ATen thread-local state (grad mode,
/// profiler) and floating-point environment (rounding, flush-to-zero), and a
/// single-threaded BLAS, which is restored afterwards; otherwise solve(0, N) on the
/// caller's thread. Not
/// reentrant: `solve` must not call it. `solve`
/// writes its results into the caller's outputs at [first, last). An exception in
/// any range is rethrown here after every range has finished. `max_workers` caps
/// the ranges (work too small to pay for starting a thread); each range still
/// gets a single-threaded BLAS.
void for_each_stack_range(const at::Tensor& stack, const std::function<void(int64_t first, int64_t last)>& solve,
    int64_t max_workers = std::numeric_limits<int64_t>::max());

/// The same over `count` work items on `device` (a stack's matrices, or pieces of
/// them) instead of a stack's matrices.
void for_each_range(int64_t count, const at::Device& device,
    const std::function<void(int64_t first, int64_t last)>& solve,
    int64_t max_workers = std::numeric_limits<int64_t>::max());

/// Memory-bound passes over a stack (element-wise updates, per-matrix norms, dash's
/// own per-matrix loops) on the cores: `pass(first, last)` over ranges of the
/// stack's matrices, at most one per kMinBytesPerRange of `bytes` (the memory the
/// pass moves). On a CPU whose ATen intra-op pool has several threads, the ranges
/// run on that pool (at::parallel_for); where it has one (Debian's LibTorch on this
/// project's 2-core machine, where one core moves about half the bytes per second
/// that two do), on for_each_range()'s threads, as many as OpenBLAS has (so
/// OPENBLAS_NUM_THREADS bounds them, as it bounds the BLAS splits). Elsewhere, or
/// with one range, pass(0, N) on the caller's thread. Each range works on its own
/// matrices, so a matrix's result does not depend on the split. A pass that writes
/// through ATen ops must have read its outputs' data_ptr() on the caller's thread
/// first (copy-on-write storages, stack_blas.cpp). Not reentrant (for_each_range).
void for_each_pass_range(
    const at::Tensor& stack, double bytes, const std::function<void(int64_t first, int64_t last)>& pass);

/// The same over `count` work items on `device` (the matrices of several views,
/// matrix_transfer.h) instead of a stack's matrices.
void for_each_pass_range(int64_t count, const at::Device& device, double bytes,
    const std::function<void(int64_t first, int64_t last)>& pass);

/// dst ← src (converting where their dtypes differ) as such a pass: a conversion is
/// memory-bound, and one core alone cannot saturate the memory.
void copy_over_cores(const at::Tensor& dst, const at::Tensor& src);

/// Less memory traffic than this (≈ 0.1 ms on one core) is not worth a thread.
constexpr double kMinBytesPerRange = 2e6;

/// Whether for_each_range() can give its ranges a single-threaded BLAS: a
/// pthreads OpenBLAS, found at run time.
bool blas_threads_controllable();

/// Less work than this (≈ 0.1 ms on one core) is not worth starting a thread for:
/// callers cap for_each_range()'s `max_workers` at their FLOPs over it.
constexpr double kMinFlopsPerRange = 4e6;

}  // namespace dash::kernels
