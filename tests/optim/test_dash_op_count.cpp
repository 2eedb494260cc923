// The number of tensor operations per batched step depends on the number of
// distinct stack shapes, not on the number of blocks (spec §2). Each parameter
// adds at most two: the strided copy of its gradient into its stack and the
// strided subtraction of its update (what any per-tensor optimizer issues; on a
// CPU both are dash's own loop, kernels/matrix_transfer.h, and no ATen op).
// Operations are counted at the dispatcher (RecordFunction), top level only —
// what the optimizer itself issues — and views (metadata only, no kernel) are
// not counted.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <set>
#include <string>

namespace dash {
namespace {

thread_local int depth = 0;
thread_local int64_t counted = 0;

bool is_view(const char* name) {
  static const std::set<std::string> views = {"aten::view", "aten::reshape", "aten::_reshape_alias", "aten::narrow",
      "aten::slice", "aten::select", "aten::transpose", "aten::permute", "aten::expand", "aten::unsqueeze",
      "aten::squeeze", "aten::flatten", "aten::alias", "aten::detach", "aten::as_strided", "aten::t", "aten::view_as",
      "aten::expand_as", "aten::contiguous"};
  return views.count(name) > 0;
}

// Operations dispatched by the second step (the first allocates nothing more but
// is kept out to compare steady states). Both steps compute roots.
int64_t ops_per_step(std::vector<at::Tensor> params, Execution execution) {
  for (auto& p : params) p.set_requires_grad(true);
  Dash optimizer(params, DashOptions(0.01).block_size(4).start_step(1).root_frequency(1).execution(execution));
  auto set_grads = [&] {
    for (auto& p : params) p.mutable_grad() = at::ones_like(p) * 0.5 + p.detach() * 0.1;
  };
  set_grads();
  optimizer.step();
  set_grads();
  auto handle = at::addGlobalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (depth++ == 0 && !is_view(fn.name())) ++counted;
        return nullptr;
      },
      [](const at::RecordFunction&, at::ObserverContext*) {
        --depth;
      }).scopes({at::RecordScope::FUNCTION}));
  counted = 0;
  optimizer.step();
  at::removeCallback(handle);
  return counted;
}

TEST(DashOpCount, TwoHundredBlocksIssueNoMoreOpsThanTwo) {
  const auto two_blocks = ops_per_step({at::randn({8, 4})}, Execution::Batched);
  const auto one_parameter_200_blocks = ops_per_step({at::randn({80, 40})}, Execution::Batched);
  std::vector<at::Tensor> many;
  for (int i = 0; i < 200; ++i) many.push_back(at::randn({4, 4}));
  const auto two_hundred_parameters = ops_per_step(many, Execution::Batched);
  const auto sequential_200_blocks = ops_per_step({at::randn({80, 40})}, Execution::Sequential);
  std::cout << "ops per step: 2 blocks " << two_blocks << ", 200 blocks in one parameter " << one_parameter_200_blocks
            << ", 200 parameters " << two_hundred_parameters << ", sequential 200 blocks " << sequential_200_blocks
            << "\n";
  EXPECT_GT(two_blocks, 10);  // the counter sees the step at all
  EXPECT_LE(one_parameter_200_blocks, two_blocks);
  EXPECT_LE(two_hundred_parameters, two_blocks + 2 * 199);
  EXPECT_GT(sequential_200_blocks, 50 * two_blocks);  // the baseline really loops
}

}  // namespace
}  // namespace dash
