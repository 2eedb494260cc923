#pragma once

// The phases of a step, as profiler scopes and as an optional wall-clock split.
//
// Every phase is a RecordFunction user scope named "dash::<phase>", so any
// profiler attached to the process (PyTorch's, Kineto, or a RecordFunction
// callback) sees where a step's time goes. When enabled (dash-bench step
// --profile), the host time of each phase is also summed here. Nothing waits for
// the device: on a CPU the split is exact; on an accelerator it is the time the
// host spends issuing each phase, and a device-side profiler reads the scopes.

#include <ATen/record_function.h>

#include <array>
#include <chrono>
#include <map>
#include <string>

namespace dash::optim {

enum class Phase { Copies, Factors, Roots, Grafting, Preconditioning, Communication, Count };

/// "copies", "factors", …
const char* phase_name(Phase phase);

class PhaseProfile {
 public:
  /// Starts (or stops) summing; enabling resets the totals.
  void enable(bool on) {
    enabled_ = on;
    totals_ms_.fill(0.0);
  }
  bool enabled() const { return enabled_; }
  void add(Phase phase, double ms) { totals_ms_[static_cast<size_t>(phase)] += ms; }
  std::map<std::string, double> totals_ms() const;

 private:
  bool enabled_ = false;
  std::array<double, static_cast<size_t>(Phase::Count)> totals_ms_{};
};

/// A "dash::<phase>" profiler scope for its lifetime, and its host time added to
/// `phase` when profiling is on.
class ScopedPhase {
 public:
  ScopedPhase(PhaseProfile& profile, Phase phase);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseProfile& profile_;
  Phase phase_;
  at::RecordFunction scope_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dash::optim
