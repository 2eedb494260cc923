#include "timing.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace dash::bench {
namespace {

// Reading one value back waits for every queued kernel on the tensor's device,
// with the same code on every backend (no per-backend synchronise API).
void wait_for(const at::Tensor& result) {
  if (result.defined() && !result.is_cpu()) {
    (void)result.flatten()[0].item<double>();
  }
}

}  // namespace

TimingSummary time_it(const std::function<at::Tensor()>& work, int warmup, int repetitions) {
  for (int i = 0; i < warmup; ++i) {
    wait_for(work());
  }
  std::vector<double> times;
  for (int i = 0; i < std::max(repetitions, 1); ++i) {
    auto start = std::chrono::steady_clock::now();
    wait_for(work());
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), times.back()};
}

}  // namespace dash::bench
