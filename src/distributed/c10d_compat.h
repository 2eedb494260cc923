#pragma once

// The LibTorch 1.x / 2.x differences dash's implementation has to know about
// (the public one, the process-group class, is <dash/process_group.h>).

#include <dash/process_group.h>

namespace dash::compat {

// 1. TCPStore's libuv backend. LibTorch ≥ 2.4 asks for it by default
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

// 2. What torch.distributed hands out (the Python ProcessGroup) is c10d::ProcessGroup
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
