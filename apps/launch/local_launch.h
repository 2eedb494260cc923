#pragma once

// A process launcher for dash's tools and tests (not part of the library's API):
// N local ranks with a torchrun-style environment, for dash-train --nproc,
// dash-bench distributed and the multi-process tests.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dash::launch {

/// What launch_local_ranks returns, starting nothing, where this dash has no Gloo
/// (dash::gloo_available() is false: a LibTorch from pip): the ranks would talk
/// over Gloo. CTest's convention for a skipped test (SKIP_RETURN_CODE).
constexpr int kNoGlooExitCode = 77;

/// Runs `command` (argv) as `nproc` local processes with RANK, WORLD_SIZE,
/// MASTER_ADDR=127.0.0.1 and MASTER_PORT set, hosting their TCPStore on a free
/// loopback port. When a rank fails the others get `grace` to fail too and are
/// then killed; with a `timeout` > 0, every rank still running after it is killed
/// (exit code 124). Returns 0 when every rank exited 0, else the first failure's code;
/// kNoGlooExitCode, with a message, without Gloo.
int launch_local_ranks(const std::vector<std::string>& command, int64_t nproc,
    std::chrono::milliseconds grace = std::chrono::seconds(30),
    std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace dash::launch
