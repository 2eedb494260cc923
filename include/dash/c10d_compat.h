#pragma once

// The LibTorch 1.x / 2.x differences dash has to know about.
//
// 1. The process-group class. In 1.x every
// c10d process group (ProcessGroupGloo, ProcessGroupNCCL) derives from
// c10d::ProcessGroup; in 2.x they derive from c10d::Backend, and
// c10d::ProcessGroup became a dispatching wrapper around backends (get one with
// `group->getBackend(c10::DeviceType::CPU)`). dash::ProcessGroup is whichever
// class the concrete groups derive from, so that
// `c10::make_intrusive<c10d::ProcessGroupGloo>(...)` converts to it on both.

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

namespace dash::compat {

// 2. TCPStore's libuv backend. LibTorch ≥ 2.4 asks for it by default
// (TCPStoreOptions::useLibUV = true) and builds without libuv (Debian's) then refuse
// to start a store; older versions have no such option. The classic backend works
// in all of them, so it is chosen where the option exists.
template <typename StoreOptions>
auto use_classic_tcp_store(StoreOptions& options, int) -> decltype(options.useLibUV = false, void()) {
  options.useLibUV = false;
}
template <typename StoreOptions>
void use_classic_tcp_store(StoreOptions&, long) {}
template <typename StoreOptions>
void use_classic_tcp_store(StoreOptions& options) {
  use_classic_tcp_store(options, 0);
}

// 3. What torch.distributed hands out (the Python ProcessGroup) is c10d::ProcessGroup
// in both; the group dash talks to is the backend for the tensors' device in 2.x.
inline c10::intrusive_ptr<ProcessGroup> backend_for(
    const c10::intrusive_ptr<c10d::ProcessGroup>& group, [[maybe_unused]] c10::DeviceType device) {
#if TORCH_VERSION_MAJOR >= 2
  return group->getBackend(device);
#else
  return group;
#endif
}

}  // namespace dash::compat
