#pragma once

// The options every rank of a distributed optimizer must hold alike. Each rank
// steps its own blocks with its own options: ranks whose lr (or any option of the
// arithmetic) differ would train a model that matches no single run. The ranks
// compare a fingerprint of those options in the step's decision all-reduce (no
// collective of its own) and, only when they differ, name the options that do.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dash::optim {

/// Options a rank may set for itself: they decide how its own work runs (its
/// memory, its timing trials, when it raises for its own roots), not the numbers.
inline constexpr const char* kRankLocalOptions[] = {"workspace_limit", "execution", "max_consecutive_root_failures"};

/// One hash below 2^24 (exact in a float32, so that it travels in the decision) of
/// every group's options but kRankLocalOptions. Host arithmetic, nothing allocated.
float agreed_options_fingerprint(const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// [h, −h] per agreed option ("group <g> <name>"), float32 on `device`: after a
/// maximum over the ranks, disagreeing_options() names those that differ.
at::Tensor agreed_option_extremes(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::Device& device);
std::vector<std::string> disagreeing_options(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::Tensor& extremes);

}  // namespace dash::optim
