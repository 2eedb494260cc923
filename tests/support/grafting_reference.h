#pragma once

// Spec §4 steps 3, 5 and 6 written out in float64, apart from the library: the
// reference that the grafting tests (test_grafting_contract, test_block_update)
// compare each grafting type with. A new GraftingType adds its case here.

#include "optim/block_update.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace dash::testing {

/// M, A, Ĝ and P_g after one step from `m`, `a` for gradient `g` at per-block step
/// counts `steps` ((n, 1, 1)); `a` is undefined for the types without a statistic.
struct ExpectedGrafting {
  at::Tensor m, a, ghat, graft;
};

inline ExpectedGrafting expected_grafting(const at::Tensor& g, const at::Tensor& m, const at::Tensor& a,
    const at::Tensor& steps, const optim::StepHyper& hyper) {
  const auto t = steps.to(at::kDouble);
  auto correction = [&](double beta) { return hyper.bias_correction ? 1.0 - at::pow(beta, t) : at::ones_like(t); };
  ExpectedGrafting out;
  out.m = hyper.beta_grad * m + (1.0 - hyper.beta_grad) * g;
  out.ghat = out.m / correction(hyper.beta_grad);
  switch (hyper.grafting) {
    case GraftingType::Adam:
      out.a = hyper.beta_graft * a + (1.0 - hyper.beta_graft) * g * g;
      out.graft = out.ghat / ((out.a / correction(hyper.beta_graft)).sqrt() + hyper.eps_graft);
      return out;
    case GraftingType::RMSprop:
      out.a = hyper.beta_graft * a + (1.0 - hyper.beta_graft) * g * g;
      out.graft = out.ghat / (out.a.sqrt() + hyper.eps_graft);
      return out;
    case GraftingType::AdaGrad:
      out.a = a + g * g;
      out.graft = out.ghat / (out.a.sqrt() + hyper.eps_graft);
      return out;
    case GraftingType::SGD:
    case GraftingType::None:  // P_g = Ĝ, the direction of steps before t_start
      out.graft = out.ghat;
      return out;
  }
  ADD_FAILURE() << "no reference for grafting type " << static_cast<int>(hyper.grafting);
  return out;
}

}  // namespace dash::testing
