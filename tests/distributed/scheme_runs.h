#pragma once

// One run of the distributed problem (distributed_problem.h) in one process on the
// ranks' average gradient, and on ranks of a scheme as threads of this process
// (Gloo): what the distributor contract suite and the family contract suite compare
// bitwise.

#include "distributed/distributed_problem.h"
#include "support/gloo_threads.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace dash::testing {

// Rank r's own gradients at a step: the problem's, plus noise of its own.
inline std::vector<at::Tensor> local_gradients(const std::vector<at::Tensor>& params, int64_t step, int64_t rank) {
  set_distributed_problem_gradients(params, step);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(5000 + 100 * step + rank);
  std::vector<at::Tensor> grads;
  for (const auto& param : params) grads.push_back(param.grad() + at::randn(param.sizes(), generator, at::kFloat));
  return grads;
}

// Parameter `missing` has no gradient on rank 1 (-1: none missing).
inline bool lacks_gradient(int64_t rank, size_t param, int64_t missing) {
  return rank == 1 && static_cast<int64_t>(param) == missing;
}

inline std::vector<at::Tensor> average_gradients(
    const std::vector<at::Tensor>& params, int64_t step, int64_t ranks, int64_t missing) {
  std::vector<std::vector<at::Tensor>> per_rank;
  for (int64_t rank = 0; rank < ranks; ++rank) per_rank.push_back(local_gradients(params, step, rank));
  std::vector<at::Tensor> average;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<at::Tensor> terms;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      terms.push_back(lacks_gradient(rank, i, missing) ? at::zeros_like(params[i]) : per_rank[rank][i]);
    }
    average.push_back(at::stack(terms).sum(0).div(static_cast<double>(ranks)));
  }
  return average;
}

struct Problem {
  bool tiny = false;
  PreconditionerType family = PreconditionerType::Shampoo;
  double workspace_limit = DashOptions().workspace_limit();
  int64_t missing = -1;
  /// float64: the ranks exchange the updates (float32 values would round the
  /// parameters), not the parameters' new values.
  at::ScalarType dtype = at::kFloat;
  NonFiniteGradients policy = NonFiniteGradients::Error;

  DashOptions options() const {
    return distributed_problem_options()
        .workspace_limit(workspace_limit)
        .non_finite_gradients(policy)
        .preconditioner(family);
  }

  std::vector<at::Tensor> parameters() const {
    auto params = distributed_problem_parameters(tiny);
    if (dtype == at::kFloat) return params;
    for (auto& param : params) param = param.detach().to(dtype).set_requires_grad(true);
    return params;
  }
};

inline std::vector<at::Tensor> one_process(const Problem& run, int64_t ranks) {
  auto params = run.parameters();
  Dash optimizer(params, run.options());
  for (int64_t step = 0; step < kDistributedProblemSteps; ++step) {
    const auto average = average_gradients(params, step, ranks, run.missing);
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = average[i];
    optimizer.step();
  }
  std::vector<at::Tensor> values;
  for (const auto& param : params) values.push_back(param.detach().clone());
  return values;
}

// Each rank's parameters after the run: under Zero from its own gradients, under
// Replicated from the average, as DDP would have made it.
inline std::vector<std::vector<at::Tensor>> on_ranks(DistributionScheme scheme, int64_t ranks, const Problem& run) {
  std::vector<std::vector<at::Tensor>> results(static_cast<size_t>(ranks));
  on_gloo_ranks(ranks, DistributedOptions().scheme(scheme), [&](int64_t rank, DistributedContext& context) {
    auto params = run.parameters();
    Dash optimizer(
        params, run.options(), std::shared_ptr<const DistributedContext>(&context, [](const DistributedContext*) {}));
    for (int64_t step = 0; step < kDistributedProblemSteps; ++step) {
      const auto grads = scheme == DistributionScheme::Zero ? local_gradients(params, step, rank)
                                                            : average_gradients(params, step, ranks, run.missing);
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].mutable_grad() = lacks_gradient(rank, i, run.missing) ? at::Tensor() : grads[i];
      }
      optimizer.step();
    }
    for (const auto& param : params) results[rank].push_back(param.detach().clone());
  });
  return results;
}

inline void expect_bitwise(
    const std::vector<std::vector<at::Tensor>>& ranks, const std::vector<at::Tensor>& reference) {
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    ASSERT_EQ(ranks[rank].size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_TRUE(at::equal(ranks[rank][i], reference[i]))
          << "rank " << rank << ", parameter " << i << ": largest difference "
          << (ranks[rank][i] - reference[i]).abs().max().item<double>();
    }
  }
}

}  // namespace dash::testing
