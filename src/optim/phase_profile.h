#pragma once

// Optional wall-clock split of a step into phases (dash-bench step --profile).
// Off by default; when on, every phase boundary waits for the device, which
// slows the step — it is a measuring tool, not for training.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <chrono>
#include <map>
#include <string>

namespace dash::optim {

enum class Phase { Copies, Factors, Roots, Grafting, Preconditioning, Communication, Count };

class PhaseProfile {
 public:
  void enable(bool on, const c10::Device& device) {
    enabled_ = on;
    device_ = device;
    totals_ms_.fill(0.0);
  }
  bool enabled() const { return enabled_; }
  void add(Phase phase, double ms) { totals_ms_[static_cast<size_t>(phase)] += ms; }
  std::map<std::string, double> totals_ms() const;
  /// Waits until the device has finished all queued work.
  void synchronize() const;

 private:
  bool enabled_ = false;
  c10::Device device_ = c10::Device(c10::kCPU);
  std::array<double, static_cast<size_t>(Phase::Count)> totals_ms_{};
};

/// Adds the time from construction to destruction to `phase` when profiling is on.
class ScopedPhase {
 public:
  ScopedPhase(PhaseProfile& profile, Phase phase);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseProfile& profile_;
  Phase phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dash::optim
