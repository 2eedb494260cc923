#pragma once

// Wall-clock timing of tensor work, synchronised on accelerators.

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace dash::bench {

struct TimingSummary {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
};

/// Runs `work` `warmup` times untimed, then `repetitions` times timed. `work`
/// returns a tensor the device must have finished before the clock stops.
TimingSummary time_it(const std::function<at::Tensor()>& work, int warmup, int repetitions);

}  // namespace dash::bench
