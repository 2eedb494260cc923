#pragma once

// Visits the tensor operations that the code under test dispatches itself: those
// called at the top level while `run` runs on this thread, not the ones inside
// another op. Counted at the dispatcher (RecordFunction), with their inputs, so a
// test can check what a solver issues (matmul shapes, copies of a stack) without
// timing it.

#include <ATen/record_function.h>

#include <functional>
#include <memory>

namespace dash::testing {

inline void for_each_top_level_op(
    const std::function<void(const at::RecordFunction&)>& visit, const std::function<void()>& run) {
  struct Visiting {
    const std::function<void(const at::RecordFunction&)>* visit = nullptr;
    int depth = 0;
  };
  static thread_local Visiting visiting;
  visiting = {&visit, 0};
  auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (visiting.depth++ == 0) (*visiting.visit)(fn);
        return nullptr;
      },
      [](const at::RecordFunction&, at::ObserverContext*) { --visiting.depth; })
                                               .needsInputs(true)
                                               .scopes({at::RecordScope::FUNCTION}));
  // Removed however `run` ends.
  struct Remove {
    at::CallbackHandle handle;
    ~Remove() { at::removeCallback(handle); }
  } remove{handle};
  run();
}

}  // namespace dash::testing
