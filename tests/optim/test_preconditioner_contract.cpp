// The contract every preconditioner family keeps, checked for each one of
// dash::kPreconditioners (a new family is checked by adding it there and its float64
// reference to tests/support/preconditioner_reference.h):
//
// - its training matches the float64 reference of its paper's arithmetic;
// - a resume from its state keyed by parameter continues bitwise;
// - every entry of that state is refused, naming it, when it holds values its field
//   may not (a poisoned state: NaN, ±Inf, negative counts);
// - ranks of every scheme that splits the blocks end bitwise where one process on
//   the ranks' average gradient ends;
// - a workspace limit changes nothing but the last bits of its amortised products;
// - on a CUDA device (where one exists), its step matches the CPU's.

#include <dash/distributed.h>
#include <dash/optimizer.h>

#include "distributed/scheme_runs.h"
#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/preconditioner_reference.h"
#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

namespace dash {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 8;

class PreconditionerContract : public ::testing::TestWithParam<PreconditionerType> {
 protected:
  PreconditionerType family() const { return GetParam(); }

  // EVD roots (the reference's eigh), Adam grafting, roots from step 2 every 3 steps.
  DashOptions options() const {
    return DashOptions(0.05).preconditioner(family()).block_size(4).start_step(2).root_frequency(3).root(
        testing::solver_options(RootMethod::EVD).epsilon(1e-3));
  }

  // Two matrices that tile into full and edge blocks at B = 4, and a vector (AdamW).
  static std::vector<at::Tensor> parameters() {
    auto generator = at::detail::createCPUGenerator(3);
    std::vector<at::Tensor> params{
        at::randn({6, 4}, generator), at::randn({3, 5}, generator), at::randn({5}, generator)};
    for (auto& param : params) param.set_requires_grad(true);
    return params;
  }

  static std::vector<at::Tensor> gradients_at(const std::vector<at::Tensor>& params, int step) {
    auto generator = at::detail::createCPUGenerator(100 + step);
    std::vector<at::Tensor> grads;
    for (const auto& param : params) grads.push_back(param.detach() * 0.3 + at::randn(param.sizes(), generator));
    return grads;
  }

  static void train(Dash& optimizer, const std::vector<at::Tensor>& params, int first, int last) {
    for (int step = first; step < last; ++step) {
      const auto grads = gradients_at(params, step);
      for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[i];
      optimizer.step();
    }
  }

  static std::vector<ParameterState> states_of(const Dash& optimizer, size_t count) {
    std::vector<ParameterState> states;
    for (size_t i = 0; i < count; ++i) {
      ParameterState copies;
      for (const auto& [name, tensor] : optimizer.parameter_state(i)) copies.emplace_back(name, tensor.clone());
      states.push_back(std::move(copies));
    }
    return states;
  }
};

TEST_P(PreconditionerContract, TrainingMatchesItsFloat64Reference) {
  auto params = parameters();
  std::vector<at::Tensor> references;
  std::vector<std::vector<at::Tensor>> gradients(2);
  for (int i = 0; i < 2; ++i) references.push_back(params[i].detach().to(at::kDouble).clone());
  Dash optimizer(params, options());
  for (int step = 0; step < kSteps; ++step) {
    const auto grads = gradients_at(params, step);
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[i];
    for (int i = 0; i < 2; ++i) gradients[i].push_back(grads[i].to(at::kDouble));
    optimizer.step();
  }
  for (int i = 0; i < 2; ++i) {
    const auto start = references[i].clone();
    testing::reference_training(family(), options(), references[i], gradients[i]);
    // float32 arithmetic on O(1) values through three root computations.
    const auto error =
        ((params[i].detach().to(at::kDouble) - references[i]).abs().max() / references[i].abs().max()).item<double>();
    EXPECT_LE(error, 1e-4) << "parameter " << i;
    EXPECT_GT((references[i] - start).abs().max().item<double>(), 0.05) << "the reference really moves";
  }
}

TEST_P(PreconditionerContract, AResumeFromTheStateKeyedByParameterIsBitwise) {
  auto params = parameters();
  Dash optimizer(params, options());
  train(optimizer, params, 0, kSteps / 2);
  const auto states = states_of(optimizer, params.size());
  std::vector<at::Tensor> resumed;
  for (const auto& param : params) resumed.push_back(param.detach().clone().set_requires_grad(true));
  Dash fresh(resumed, DashOptions(0.5));  // other options: the state's come with it
  fresh.load_parameter_states({options()}, states, {kSteps / 2, 0, 0});
  train(optimizer, params, kSteps / 2, kSteps);
  train(fresh, resumed, kSteps / 2, kSteps);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(params[i], resumed[i])) << "parameter " << i;
}

// Every entry, float or count: a NaN where it holds numbers, −1 where it counts.
TEST_P(PreconditionerContract, EveryPoisonedEntryIsRefusedNamingIt) {
  auto params = parameters();
  Dash optimizer(params, options());
  train(optimizer, params, 0, kSteps);
  const auto states = states_of(optimizer, params.size());
  int64_t poisoned = 0;
  for (size_t p = 0; p < states.size(); ++p) {
    for (size_t e = 0; e < states[p].size(); ++e) {
      const auto& [name, tensor] = states[p][e];
      if (tensor.scalar_type() == at::kBool || name.find("root_choice") != std::string::npos) continue;
      auto damaged = states;
      auto& bad = damaged[p][e].second;
      bad = bad.clone();
      bad.view(-1)[0] = at::isFloatingType(bad.scalar_type()) && name.find("step") == std::string::npos
                            ? std::numeric_limits<double>::quiet_NaN()
                            : -1.0;
      auto fresh_params = parameters();
      Dash fresh(fresh_params, options());
      EXPECT_THAT(testing::error_of([&] {
        fresh.load_parameter_states({options()}, damaged, {kSteps, 0, 0});
      }),
          HasSubstr("parameter " + std::to_string(p) + "'s state entry '" + name + "'"));
      EXPECT_EQ(fresh.diagnostics().steps_taken, 0) << "a refused load changes nothing";
      ++poisoned;
    }
  }
  EXPECT_GT(poisoned, 10);  // (the engine's moments alone: 3 per block, 4 blocks)
}

TEST_P(PreconditionerContract, RanksOfEverySchemeEndAsOneProcess) {
  DASH_SKIP_WITHOUT_GLOO();
  testing::Problem run;
  run.family = family();
  for (const auto scheme : {DistributionScheme::Replicated, DistributionScheme::Zero}) {
    SCOPED_TRACE(to_string(scheme));
    testing::expect_bitwise(testing::on_ranks(scheme, 2, run), testing::one_process(run, 2));
  }
}

TEST_P(PreconditionerContract, AWorkspaceLimitChangesAtMostTheLastBits) {
  auto unbounded = parameters();
  auto bounded = parameters();
  Dash whole(unbounded, options().workspace_limit(0.0));
  Dash chunked(bounded, options().workspace_limit(1.0));  // one byte: a block per chunk
  train(whole, unbounded, 0, kSteps);
  train(chunked, bounded, 0, kSteps);
  EXPECT_GT(chunked.diagnostics().workspace_limit_bytes, 0);
  for (size_t i = 0; i < unbounded.size(); ++i) {
    const auto error = ((bounded[i] - unbounded[i]).abs().max() / unbounded[i].abs().max()).item<double>();
    EXPECT_LE(error, 1e-5) << "parameter " << i;
  }
}

TEST_P(PreconditionerContract, ItsCudaStepMatchesTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto cpu = parameters();
  std::vector<at::Tensor> cuda;
  for (const auto& param : cpu) cuda.push_back(param.detach().cuda().set_requires_grad(true));
  Dash on_cpu(cpu, options());
  Dash on_cuda(cuda, options());
  for (int step = 0; step < kSteps; ++step) {
    const auto grads = gradients_at(cpu, step);
    for (size_t i = 0; i < cpu.size(); ++i) {
      cpu[i].mutable_grad() = grads[i];
      cuda[i].mutable_grad() = grads[i].cuda();
    }
    on_cpu.step();
    on_cuda.step();
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    const auto error = ((cuda[i].cpu() - cpu[i]).abs().max() / cpu[i].abs().max()).item<double>();
    EXPECT_LE(error, 1e-4) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, PreconditionerContract, ::testing::ValuesIn(kPreconditioners),
    [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace dash
