// Gloo groups and torchrun-style rendezvous.

#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO  // the header's guard; LibTorch's CPU build has Gloo compiled in
#endif

#include <dash/distributed.h>

#include "distributed/c10d_compat.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// PyTorch's pip wheels ship LibTorch without Gloo's own headers, which
// ProcessGroupGloo.hpp includes: there dash builds without making Gloo groups
// itself (Python users pass torch.distributed's group; NCCL is unaffected).
#if __has_include(<gloo/algorithm.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define DASH_HAS_GLOO_HEADERS 1
#else
#define DASH_HAS_GLOO_HEADERS 0
#endif

#include <cstdlib>
#include <string>

namespace dash {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t integer_variable(const char* name, int64_t low, int64_t high) {
  const auto text = variable(name);
  TORCH_CHECK(text.has_value(), "dash: environment variable ", name, " is not set (torchrun-style launch needs ",
      "MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE)");
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK(used == text->size() && value >= low && value <= high, "dash: environment variable ", name, "='", *text,
      "' is not an integer in [", low, ", ", high, "]");
  return value;
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace

bool gloo_available() { return DASH_HAS_GLOO_HEADERS != 0; }

c10::intrusive_ptr<ProcessGroup> make_gloo_process_group(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
    int64_t world_size, std::chrono::milliseconds timeout, const std::string& hostname) {
  TORCH_CHECK(
      world_size >= 1 && rank >= 0 && rank < world_size, "dash: rank ", rank, " is outside world size ", world_size);
#if DASH_HAS_GLOO_HEADERS
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(hostname.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                              : c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(
      store, static_cast<int>(rank), static_cast<int>(world_size), options);
#else
  (void)store, (void)timeout, (void)hostname;
  TORCH_CHECK(false,
      "dash: this build of dash cannot make Gloo process groups: the LibTorch it was built against "
      "has no Gloo headers (gloo/algorithm.h; PyTorch's pip wheels ship none). Pass a process group "
      "made by torch.distributed, or build against a LibTorch distribution that has them");
#endif
}

std::optional<RankEnvironment> rank_environment() {
  if (!variable("RANK").has_value() && !variable("WORLD_SIZE").has_value()) return std::nullopt;
  RankEnvironment environment;
  environment.world_size = integer_variable("WORLD_SIZE", 1, 1 << 20);
  environment.rank = integer_variable("RANK", 0, environment.world_size - 1);
  environment.master_port = integer_variable("MASTER_PORT", 1, 65535);
  const auto address = variable("MASTER_ADDR");
  TORCH_CHECK(address.has_value(), "dash: environment variable MASTER_ADDR is not set (RANK and WORLD_SIZE are)");
  environment.master_addr = *address;
  const auto agent_store = variable("TORCHELASTIC_USE_AGENT_STORE");
  environment.store_hosted_by_launcher = agent_store.has_value() && (*agent_store == "True" || *agent_store == "1");
  return environment;
}

c10::intrusive_ptr<ProcessGroup> gloo_process_group_from_environment(
    const RankEnvironment& environment, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(environment.master_port);
  options.isServer = environment.rank == 0 && !environment.store_hosted_by_launcher;
  options.numWorkers = static_cast<size_t>(environment.world_size);
  options.timeout = timeout;
  compat::use_classic_tcp_store(options);
  auto store = c10::make_intrusive<c10d::TCPStore>(environment.master_addr, options);
  // Loopback rendezvous: every rank is on this machine. Otherwise: this host's
  // own address, as Gloo resolves it.
  const std::string hostname = is_loopback(environment.master_addr) ? "127.0.0.1" : "";
  return make_gloo_process_group(store, environment.rank, environment.world_size, timeout, hostname);
}

}  // namespace dash
