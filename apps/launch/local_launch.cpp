// launch_local_ranks: N local processes with a torchrun-style environment.

#include "local_launch.h"

#include "distributed/c10d_compat.h"

#include <dash/distributed.h>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>
#include <thread>

extern char** environ;

namespace dash::launch {
namespace {

std::vector<std::string> environment_for(int64_t rank, int64_t nproc, int64_t port) {
  std::vector<std::string> variables;
  const std::vector<std::string> overridden = {
      "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT=", "TORCHELASTIC_USE_AGENT_STORE="};
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    bool keep = true;
    for (const auto& prefix : overridden) keep = keep && text.rfind(prefix, 0) != 0;
    if (keep) variables.push_back(text);
  }
  variables.push_back("RANK=" + std::to_string(rank));
  variables.push_back("LOCAL_RANK=" + std::to_string(rank));
  variables.push_back("WORLD_SIZE=" + std::to_string(nproc));
  variables.push_back("MASTER_ADDR=127.0.0.1");
  variables.push_back("MASTER_PORT=" + std::to_string(port));
  variables.push_back("TORCHELASTIC_USE_AGENT_STORE=True");
  return variables;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& text : strings) result.push_back(text.data());
  result.push_back(nullptr);
  return result;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int launch_local_ranks(const std::vector<std::string>& command, int64_t nproc, std::chrono::milliseconds grace,
    std::chrono::milliseconds timeout) {
  TORCH_CHECK(!command.empty(), "dash: launch_local_ranks needs a command");
  TORCH_CHECK(nproc >= 1, "dash: launch_local_ranks needs nproc ≥ 1, got ", nproc);
  if (!dash::gloo_available()) {
    std::cerr << "dash: local ranks talk over Gloo, and this dash was built against a LibTorch without Gloo headers "
                 "(pip wheels ship none): nothing was started. Build against a LibTorch with Gloo (Debian's "
                 "libtorch-dev, or one built from source), or train from Python with torch.distributed.\n";
    return kNoGlooExitCode;
  }
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;  // any free port
  store_options.isServer = true;
  store_options.waitWorkers = false;
  compat::use_classic_tcp_store(store_options);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  const int64_t port = store->getPort();

  std::vector<pid_t> children;
  for (int64_t rank = 0; rank < nproc; ++rank) {
    auto arguments = command;
    auto variables = environment_for(rank, nproc, port);
    auto argv = pointers(arguments);
    auto envp = pointers(variables);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
    if (error != 0) {
      for (const auto child : children) kill(child, SIGKILL);
      for (const auto child : children) waitpid(child, nullptr, 0);
      TORCH_CHECK(false, "dash: cannot start rank ", rank, " ('", command[0], "'): ", std::strerror(error));
    }
    children.push_back(pid);
  }

  const auto started = std::chrono::steady_clock::now();
  int result = 0;
  size_t running = children.size();
  std::vector<bool> done(children.size(), false);
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    for (size_t r = 0; r < children.size(); ++r) {
      int status = 0;
      if (done[r] || waitpid(children[r], &status, WNOHANG) != children[r]) continue;
      done[r] = true;
      --running;
      const int code = exit_code(status);
      if (code != 0 && result == 0) {
        result = code;
        deadline = std::chrono::steady_clock::now() + grace;
        std::cerr << "dash: rank " << r << " failed (exit code " << code << "); the others get "
                  << grace.count() / 1000.0 << " s to finish\n";
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const bool timed_out = timeout.count() > 0 && now - started > timeout;
    if (running > 0 && (now > deadline || timed_out)) {
      for (size_t r = 0; r < children.size(); ++r) {
        if (!done[r]) {
          std::cerr << "dash: killing rank " << r << (timed_out ? " (launch timeout)" : "") << "\n";
          kill(children[r], SIGKILL);
        }
      }
      if (timed_out && result == 0) result = 124;
      deadline = std::chrono::steady_clock::time_point::max();
      timeout = std::chrono::milliseconds(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

}  // namespace dash::launch
