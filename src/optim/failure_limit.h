#pragma once

// Distributed Shampoo's bounded-failure policy (DashOptions::
// max_consecutive_root_failures), for every family alike: an item of a family's
// amortised work (a factor's inverse root) that failed that many computations in a
// row leaves its preconditioner stale, and the step raises.

#include <torch/optim/optimizer.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dash::optim {

/// One stack of a family's amortised items that can fail (a factor stack's roots).
struct FailureRecord {
  int64_t group = 0;
  /// (N,) int64: each item's computations failed in a row; undefined before the
  /// stack's first computation.
  at::Tensor consecutive;
  /// What it is, for the error ("an inverse root in factor stack 2 (...)"), and
  /// what usually helps.
  std::function<std::string()> describe;
  std::function<std::string()> remedy;
};

/// Writes into `out` (a () float tensor on the device, for the step's one read
/// back) how far the worst item of `records` is past its group's limit: the largest
/// consecutive failures − limit + 1 over the records whose group sets a limit,
/// clamped at 0, so positive exactly when some item has reached its limit.
/// `worst` ((records + 1,) int64 on the device, kept by the caller) holds each
/// record's worst count: nothing is allocated, so a step may do this every time
/// (the groups' limits may change between steps).
void failure_excess_into(at::Tensor out, at::Tensor worst, const std::vector<FailureRecord>& records,
    const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// Raises, naming the first record over its limit, or another rank's when none here
/// is (host reads: this is the error path).
[[noreturn]] void raise_failure_limit(
    const std::vector<FailureRecord>& records, const std::vector<torch::optim::OptimizerParamGroup>& groups);

}  // namespace dash::optim
