#pragma once

// The peak of tensor memory a piece of work holds above what was held when it
// began, as the allocators report it: c10's memory-reporting hook, which the CPU
// allocator and CUDA's caching allocator call for every allocation and free (the
// hook behind the PyTorch profiler's profile_memory). It sees this thread and the
// threads that take over its thread-local state (kernels/core_ranges.h's split).
//
// The hook has one slot per thread. Where a profiler already holds it, nothing is
// measured: the profiler's own state must stay where the profiler looks for it.
// As under the profiler, freeing a CPU tensor that was allocated before the
// measurement began makes LibTorch log "Memory block of unknown size..." (once
// per thousand such frees), and that free is not subtracted: the peak is then an
// upper bound.

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace dash::common {

class MemoryPeakReporter final : public c10::MemoryReportingInfoBase {
 public:
  // LibTorch 1.x passes the totals as int64_t, 2.x as size_t; whichever the base
  // class declares is overridden, the other is an unused overload.
  void reportMemoryUsage(void*, int64_t size, int64_t, int64_t, c10::Device) { record(size); }
  void reportMemoryUsage(void*, int64_t size, size_t, size_t, c10::Device) { record(size); }
  bool memoryProfilingEnabled() const override { return true; }

  int64_t peak() const { return peak_.load(); }

 private:
  void record(int64_t size) {
    const int64_t now = held_ += size;
    for (auto seen = peak_.load(); now > seen && !peak_.compare_exchange_weak(seen, now);) {
    }
  }

  std::atomic<int64_t> held_{0};
  std::atomic<int64_t> peak_{0};
};

/// While alive, measures the peak of tensor memory held above the level at its
/// construction (allocations minus frees, every device); see the file comment.
class MeasureMemoryPeak {
 public:
  MeasureMemoryPeak() {
    if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) != nullptr) return;
    reporter_ = std::make_shared<MemoryPeakReporter>();
    guard_ = std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, reporter_);
  }
  MeasureMemoryPeak(const MeasureMemoryPeak&) = delete;
  MeasureMemoryPeak& operator=(const MeasureMemoryPeak&) = delete;

  /// False where a profiler held the hook.
  bool measuring() const { return reporter_ != nullptr; }
  /// Bytes, or -1 when not measuring.
  int64_t peak_bytes() const { return reporter_ ? std::max<int64_t>(reporter_->peak(), 0) : -1; }

 private:
  std::shared_ptr<MemoryPeakReporter> reporter_;
  std::unique_ptr<c10::DebugInfoGuard> guard_;
};

}  // namespace dash::common
