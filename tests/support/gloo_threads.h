#pragma once

// Several ranks as threads of this test process: Gloo groups over loopback that
// meet at an in-memory store. Cheaper than processes, and a failure surfaces as
// the test's own exception.

#include <dash/distributed.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace dash::testing {

/// Runs `body(rank, context)` on `world_size` ranks at once and rethrows the first failure.
inline void on_gloo_ranks(
    int64_t world_size, DistributedOptions options, const std::function<void(int64_t, DistributedContext&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> failures(static_cast<size_t>(world_size));
  std::vector<std::thread> ranks;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        DistributedContext context(make_gloo_process_group(store, rank, world_size, std::chrono::seconds(60)), options);
        body(rank, context);
      } catch (...) {
        failures[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  for (auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace dash::testing
