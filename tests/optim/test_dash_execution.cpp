// Batched and sequential execution are the same math: after 20 steps the
// parameters agree for every root method.

#include <dash/option_names.h>
#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

namespace dash {
namespace {

std::vector<at::Tensor> train(const DashOptions& options, int steps = 20) {
  auto generator = at::detail::createCPUGenerator(3);
  // Ragged blocks (B = 4): 10×6, a conv-shaped 4-D weight, 1-D and 0-D parameters.
  std::vector<at::Tensor> params = {at::randn({10, 6}, generator), at::randn({3, 2, 2, 2}, generator),
      at::randn({9}, generator), at::randn({}, generator)};
  for (auto& p : params) p.set_requires_grad(true);
  Dash optimizer(params, options);
  auto targets = at::randn({10, 6}, generator);
  for (int t = 0; t < steps; ++t) {
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    // An ill-conditioned quadratic so that the preconditioner matters.
    params[0].mutable_grad() = (params[0].detach() - targets) * at::linspace(0.01, 1.0, 6).view({1, 6});
    params[1].mutable_grad() = params[1].detach() * 0.5 + at::randn({3, 2, 2, 2}, generator);
    params[2].mutable_grad() = params[2].detach() + at::randn({9}, generator);
    params[3].mutable_grad() = params[3].detach();
    optimizer.step();
  }
  std::vector<at::Tensor> result;
  for (auto& p : params) result.push_back(p.detach().clone());
  return result;
}

class ExecutionModes : public ::testing::TestWithParam<RootMethod> {};

// Relative difference ≤ 1e-5: the two modes run identical formulas, but a
// batched eigh/bmm may sum in another order than the one-matrix call.
TEST_P(ExecutionModes, SequentialEqualsBatchedAfter20Steps) {
  auto options = DashOptions(0.02).block_size(4).start_step(3).root_frequency(2)
      .one_dimensional(OneDimensional::Shampoo1D).root(InverseRootOptions().method(GetParam()).epsilon(1e-6)
      .chebyshev_interval_min(1e-2));
  auto batched = train(options);
  auto sequential = train(DashOptions(options).execution(Execution::Sequential));
  for (size_t i = 0; i < batched.size(); ++i) {
    auto scale = batched[i].abs().max().item<double>();
    EXPECT_LE((batched[i] - sequential[i]).abs().max().item<double>() / scale, 1e-5) << "parameter " << i;
    EXPECT_TRUE(at::isfinite(batched[i]).all().item<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(AllMethods, ExecutionModes,
    ::testing::Values(RootMethod::EVD, RootMethod::CoupledNewton, RootMethod::NewtonDB, RootMethod::Chebyshev),
    [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace dash
