#pragma once

// Counts the tensor memory allocations made while a CountAllocations object lives,
// on its thread and on the threads its work is split over (core_ranges.h's split
// carries the caller's thread-local state, this reporter included, to its helpers).
// It hooks into c10's memory-reporting interface (what the profiler's
// profile_memory uses), which the CPU allocator and CUDA's caching allocator both
// call, so it counts on every backend without replacing any allocator. Frees are
// reported with a negative size and not counted. Several threads may report at
// once: the counts are atomic.
//
// Allocations made inside a batched matmul kernel (aten::bmm, aten::baddbmm) are
// the backend's own — LibTorch's CPU bf16 bmm (oneDNN) takes a scratch per call —
// and are counted apart, in `in_matmul`, so that a test can hold dash's code to
// "no allocation" whatever the backend does. Whether an allocation is inside one
// is a property of the thread that makes it.

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

namespace dash::testing {

class AllocationReporter : public c10::MemoryReportingInfoBase {
 public:
  explicit AllocationReporter(int64_t large_bytes) : large_bytes_(large_bytes) {}

  std::atomic<int64_t> count{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> largest{0};
  std::atomic<int64_t> large{0};      ///< allocations of at least large_bytes
  std::atomic<int64_t> in_matmul{0};  ///< inside a bmm/baddbmm kernel; not in the counts above

  // LibTorch 1.x passes the totals as int64_t, 2.x as size_t; whichever the base
  // class declares is overridden, the other is an unused overload.
  void reportMemoryUsage(void*, int64_t size, int64_t, int64_t, c10::Device) { record(size); }
  void reportMemoryUsage(void*, int64_t size, size_t, size_t, c10::Device) { record(size); }
  bool memoryProfilingEnabled() const override { return true; }

  /// How many bmm/baddbmm kernels the calling thread is inside.
  static int& matmul_depth() {
    thread_local int depth = 0;
    return depth;
  }

 private:
  void record(int64_t size) {
    if (size <= 0) return;
    if (matmul_depth() > 0) {
      ++in_matmul;
      return;
    }
    if (size >= large_bytes_) ++large;
    ++count;
    bytes += size;
    for (auto seen = largest.load(); size > seen && !largest.compare_exchange_weak(seen, size);) {
    }
  }

  int64_t large_bytes_;
};

/// While alive, allocations of this thread and its split's helpers are counted in
/// reporter(); those of at least `large_bytes` also in reporter().large.
class CountAllocations {
 public:
  explicit CountAllocations(int64_t large_bytes = 1)
      : reporter_(std::make_shared<AllocationReporter>(large_bytes)),
        guard_(c10::DebugInfoKind::PROFILER_STATE, reporter_) {
    // A thread-local callback: the split's helpers run it too (with the reporter).
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          if (is_matmul(fn.name())) ++AllocationReporter::matmul_depth();
          return nullptr;
        },
        [](const at::RecordFunction& fn, at::ObserverContext*) {
          if (is_matmul(fn.name())) --AllocationReporter::matmul_depth();
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~CountAllocations() { at::removeCallback(handle_); }
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

  const AllocationReporter& reporter() const { return *reporter_; }

 private:
  static bool is_matmul(const char* name) {
    return std::strncmp(name, "aten::bmm", 9) == 0 || std::strncmp(name, "aten::baddbmm", 13) == 0;
  }

  std::shared_ptr<AllocationReporter> reporter_;
  c10::DebugInfoGuard guard_;
  at::CallbackHandle handle_ = 0;
};

}  // namespace dash::testing
