#pragma once

// The TORCH_WARN messages raised while a CapturedWarnings lives (its handler is
// process-wide), collected instead of printed, for asserting on their wording. (LibTorch 2.x
// hands the handler a c10::Warning and keeps the guard in c10::WarningUtils; 1.13
// hands it the message and keeps the guard in c10::Warning.)

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <string>

namespace dash::testing {

class CapturedWarnings : public c10::WarningHandler {
 public:
  CapturedWarnings() : guard_(this) {}
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;

  /// Every message so far, one per line.
  const std::string& text() const { return text_; }

#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override { text_ += warning.msg() + "\n"; }

 private:
  std::string text_;
  c10::WarningUtils::WarningHandlerGuard guard_;
#else
  void process(const c10::SourceLocation&, const std::string& message, const bool) override { text_ += message + "\n"; }

 private:
  std::string text_;
  c10::Warning::WarningHandlerGuard guard_;
#endif
};

}  // namespace dash::testing
