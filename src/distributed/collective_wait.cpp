#include "distributed/collective_wait.h"

#include "distributed/c10d_compat.h"

#include <c10/util/Exception.h>

namespace dash::distributed {

void wait_for_collective(
    const c10::intrusive_ptr<c10d::Work>& work, const DistributedContext& context, const std::string& what) {
  try {
    work->wait(context.options().timeout());
  } catch (const std::exception& error) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
    TORCH_CHECK(false, "dash: rank ", context.rank(), " of ", context.world_size(), ": the ", what,
        " failed (a rank exited, hung, or took longer than the timeout of ", context.options().timeout().count(),
        " ms: DistributedOptions::timeout, Python's dash.Dash(timeout=...)): ",
        c10_error != nullptr ? c10_error->what_without_backtrace() : error.what());
  }
}

}  // namespace dash::distributed
