#include "optim/phase_profile.h"

#include <cstring>

namespace dash::optim {
namespace {

// Scope names: static strings, as RecordFunction keeps the pointer.
const char* const kScopeNames[] = {
    "dash::copies", "dash::factors", "dash::roots", "dash::grafting", "dash::preconditioning", "dash::communication"};

}  // namespace

// The phase name is the scope name after its "dash::" prefix.
const char* phase_name(Phase phase) { return kScopeNames[static_cast<size_t>(phase)] + std::strlen("dash::"); }

std::map<std::string, double> PhaseProfile::totals_ms() const {
  std::map<std::string, double> result;
  for (size_t i = 0; i < totals_ms_.size(); ++i) result[phase_name(static_cast<Phase>(i))] = totals_ms_[i];
  return result;
}

ScopedPhase::ScopedPhase(PhaseProfile& profile, Phase phase)
    : profile_(profile), phase_(phase), scope_(at::RecordScope::USER_SCOPE) {
  if (scope_.isActive()) scope_.before(kScopeNames[static_cast<size_t>(phase)]);
  if (profile_.enabled()) start_ = std::chrono::steady_clock::now();
}

ScopedPhase::~ScopedPhase() {
  if (profile_.enabled()) {
    profile_.add(phase_, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count());
  }
}

}  // namespace dash::optim
