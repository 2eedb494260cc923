#pragma once

#if defined(DASH_LAYER_KERNELS) || defined(DASH_LAYER_LINALG) || defined(DASH_LAYER_BLOCKING)
#error "dash layering: <dash/process_group.h> belongs to the distributed layer (docs/architecture.md)"
#endif

// dash::ProcessGroup: the c10d class that concrete process groups (ProcessGroupGloo,
// ProcessGroupNCCL) derive from, so that `c10::make_intrusive<c10d::ProcessGroupGloo>(...)`
// converts to it on every LibTorch. In 1.x that is c10d::ProcessGroup; in 2.x it is
// c10d::Backend, and c10d::ProcessGroup became a dispatching wrapper around backends.
// This is the one LibTorch version difference in dash's public API; the others are
// private to the implementation (src/distributed/).

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace dash {
using ProcessGroup = c10d::Backend;
}  // namespace dash
#else
namespace dash {
using ProcessGroup = c10d::ProcessGroup;
}  // namespace dash
#endif
