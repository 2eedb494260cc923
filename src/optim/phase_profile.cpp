#include "optim/phase_profile.h"

#include <ATen/ATen.h>

namespace dash::optim {

std::map<std::string, double> PhaseProfile::totals_ms() const {
  static const char* const names[] = {"copies", "factors", "roots", "grafting", "preconditioning", "communication"};
  std::map<std::string, double> result;
  for (size_t i = 0; i < totals_ms_.size(); ++i) result[names[i]] = totals_ms_[i];
  return result;
}

void PhaseProfile::synchronize() const {
  // A read-back of a value produced after the queued work waits for all of it, on
  // every backend alike.
  if (!device_.is_cpu()) (void)at::zeros({1}, at::TensorOptions().device(device_)).item<float>();
}

ScopedPhase::ScopedPhase(PhaseProfile& profile, Phase phase) : profile_(profile), phase_(phase) {
  if (profile_.enabled()) {
    profile_.synchronize();
    start_ = std::chrono::steady_clock::now();
  }
}

ScopedPhase::~ScopedPhase() {
  if (profile_.enabled()) {
    profile_.synchronize();
    profile_.add(phase_, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count());
  }
}

}  // namespace dash::optim
