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
//
// So are, in `wrapped_scalars`, the CPU tensors that ATen makes of a number for an
// operator's `.Scalar` overload (t.mul_(0.9) wraps 0.9 into a 0-dim CPU tensor, and
// may convert it): allocations of at most 8 bytes inside such an operator. On CUDA
// they are host tensors that the caching allocator never sees, so without them a CPU
// count stands for a CUDA one. (On a CPU a real 0-dim result of a `.Scalar`
// operator, such as `x.mul(2.0)` for a 0-dim x, falls under this rule too; on CUDA
// nothing does.)
//
// A reporter made for one device type counts only that device's allocations (others
// in `other_device`): on CUDA, what the caching allocator hands out.
//
// One restricted to its own thread (only_this_thread()) counts only that thread's
// (others in `other_threads`): a collective's backend may work on threads of its own,
// which LibTorch 2's c10d hands the reporter to (its Gloo workers allocate there).
//
// Each counted allocation is booked under its site, the innermost dash:: scope and
// operator around it (`sites()`), so that a failing test says where they were made.

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dash::testing {

class AllocationReporter : public c10::MemoryReportingInfoBase {
 public:
  explicit AllocationReporter(int64_t large_bytes, std::optional<c10::DeviceType> device_type = std::nullopt)
      : large_bytes_(large_bytes), device_type_(device_type) {}

  std::atomic<int64_t> count{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> largest{0};
  std::atomic<int64_t> large{0};            ///< allocations of at least large_bytes
  std::atomic<int64_t> in_matmul{0};        ///< inside a bmm/baddbmm kernel; not in the counts above
  std::atomic<int64_t> wrapped_scalars{0};  ///< numbers wrapped by `.Scalar` operators; not counted
  std::atomic<int64_t> other_device{0};     ///< on another device than the one asked for; not counted
  std::atomic<int64_t> other_threads{0};    ///< on another thread, when restricted to one; not counted

  /// From now on, counts only the calling thread's allocations.
  void only_this_thread() {
    thread_ = std::this_thread::get_id();
    restricted_ = true;
  }

  // LibTorch 1.x passes the totals as int64_t, 2.x as size_t; whichever the base
  // class declares is overridden, the other is an unused overload.
  void reportMemoryUsage(void*, int64_t size, int64_t, int64_t, c10::Device device) { record(size, device); }
  void reportMemoryUsage(void*, int64_t size, size_t, size_t, c10::Device device) { record(size, device); }
  bool memoryProfilingEnabled() const override { return true; }

  /// How many bmm/baddbmm kernels the calling thread is inside.
  static int& matmul_depth() {
    thread_local int depth = 0;
    return depth;
  }

  /// How many `.Scalar` operator overloads the calling thread is inside.
  static int& scalar_operator_depth() {
    thread_local int depth = 0;
    return depth;
  }

  /// The names of the operators and scopes the calling thread is inside, innermost last.
  static std::vector<std::string>& scopes() {
    thread_local std::vector<std::string> names;
    return names;
  }

  /// Counted allocations by site, "<dash:: scope> > <operator>", one per line.
  std::string sites() const {
    std::lock_guard<std::mutex> lock(sites_mutex_);
    std::string text;
    for (const auto& [site, n] : sites_) text += "  " + std::to_string(n) + " × " + site + "\n";
    return text;
  }

 private:
  void record(int64_t size, c10::Device device) {
    if (size <= 0) return;
    if (restricted_ && std::this_thread::get_id() != thread_) {
      ++other_threads;
      return;
    }
    if (device_type_ && device.type() != *device_type_) {
      ++other_device;
      return;
    }
    if (matmul_depth() > 0) {
      ++in_matmul;
      return;
    }
    if (device.is_cpu() && scalar_operator_depth() > 0 && size <= 8) {
      ++wrapped_scalars;
      return;
    }
    if (size >= large_bytes_) ++large;
    book_site();
    ++count;
    bytes += size;
    for (auto seen = largest.load(); size > seen && !largest.compare_exchange_weak(seen, size);) {
    }
  }

  void book_site() {
    const auto& names = scopes();
    std::string scope = "(no dash:: scope)", op = "(no operator)";
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      if (op == "(no operator)" && it->rfind("aten::", 0) == 0) op = *it;
      if (it->rfind("dash::", 0) == 0) {
        scope = *it;
        break;
      }
    }
    std::lock_guard<std::mutex> lock(sites_mutex_);
    ++sites_[scope + " > " + op];
  }

  int64_t large_bytes_;
  std::optional<c10::DeviceType> device_type_;
  std::atomic<bool> restricted_{false};
  std::thread::id thread_;
  mutable std::mutex sites_mutex_;
  std::map<std::string, int64_t> sites_;
};

/// While alive, allocations of this thread and its split's helpers are counted in
/// reporter(); those of at least `large_bytes` also in reporter().large; with a
/// `device_type`, only that device's.
class CountAllocations {
 public:
  explicit CountAllocations(int64_t large_bytes = 1, std::optional<c10::DeviceType> device_type = std::nullopt)
      : reporter_(std::make_shared<AllocationReporter>(large_bytes, device_type)),
        guard_(c10::DebugInfoKind::PROFILER_STATE, reporter_) {
    // A thread-local callback: the split's helpers run it too (with the reporter).
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          AllocationReporter::scopes().emplace_back(fn.name());
          if (is_matmul(fn.name())) ++AllocationReporter::matmul_depth();
          if (is_scalar_overload(fn)) ++AllocationReporter::scalar_operator_depth();
          return nullptr;
        },
        [](const at::RecordFunction& fn, at::ObserverContext*) {
          if (!AllocationReporter::scopes().empty()) AllocationReporter::scopes().pop_back();
          if (is_matmul(fn.name())) --AllocationReporter::matmul_depth();
          if (is_scalar_overload(fn)) --AllocationReporter::scalar_operator_depth();
        }).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  }
  ~CountAllocations() { at::removeCallback(handle_); }
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

  const AllocationReporter& reporter() const { return *reporter_; }
  /// Counts only this thread's allocations from now on (AllocationReporter::only_this_thread).
  void count_only_this_thread() { reporter_->only_this_thread(); }

 private:
  static bool is_matmul(const char* name) {
    return std::strncmp(name, "aten::bmm", 9) == 0 || std::strncmp(name, "aten::baddbmm", 13) == 0;
  }

  // mul_.Scalar, add.Scalar, le.Scalar, pow.Tensor_Scalar, where.ScalarOther, ...
  static bool is_scalar_overload(const at::RecordFunction& fn) {
    const auto name = fn.operator_name();
    return name && name->overload_name.find("Scalar") != std::string::npos;
  }

  std::shared_ptr<AllocationReporter> reporter_;
  c10::DebugInfoGuard guard_;
  at::CallbackHandle handle_ = 0;
};

}  // namespace dash::testing
