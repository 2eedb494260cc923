#pragma once

// Waiting for a collective, the one way every collective of dash is waited for: within
// the context's timeout (DistributedOptions::timeout), and a failure (a rank that
// exited, hung, or took longer) raised on this rank naming the collective, without
// the C++ backtrace of the process group's error.

#include <dash/distributed.h>

#include <string>

namespace dash::distributed {

void wait_for_collective(
    const c10::intrusive_ptr<c10d::Work>& work, const DistributedContext& context, const std::string& what);

}  // namespace dash::distributed
