#pragma once

// The one LibTorch 1.x / 2.x difference dash has to know about. In 1.x every
// c10d process group (ProcessGroupGloo, ProcessGroupNCCL) derives from
// c10d::ProcessGroup; in 2.x they derive from c10d::Backend, and
// c10d::ProcessGroup became a dispatching wrapper around backends (get one with
// `group->getBackend(c10::DeviceType::CPU)`). dash::ProcessGroup is whichever
// class the concrete groups derive from, so that
// `c10::make_intrusive<c10d::ProcessGroupGloo>(...)` converts to it on both.

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace dash {
using ProcessGroup = c10d::Backend;
}  // namespace dash
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace dash {
using ProcessGroup = c10d::ProcessGroup;
}  // namespace dash
#endif
