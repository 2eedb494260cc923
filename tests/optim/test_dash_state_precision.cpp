// DashOptions::factor_precision, root_precision and moment_precision: bfloat16
// state is half the bytes, each update is the float32 one rounded once (checked
// against a float64 reference of the EMA), training stays close to float32
// state, and the precision may change between steps (resume: test_dash_checkpoint).

#include <dash/optimizer.h>

#include "support/error_message.h"
#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace dash {
namespace {

constexpr auto kBF16 = MatmulPrecision::BF16;

DashOptions bf16_state(const DashOptions& options) {
  return DashOptions(options).factor_precision(kBF16).root_precision(kBF16).moment_precision(kBF16);
}

// Parameter `param`'s state entry `name`, through a checkpoint's bytes.
at::Tensor saved_state(const Dash& optimizer, int64_t param, const std::string& name) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  std::istringstream input_bytes(bytes.str());
  torch::serialize::InputArchive input;
  input.load_from(input_bytes);
  torch::serialize::InputArchive entries;
  input.read("dash.state." + std::to_string(param), entries);
  at::Tensor tensor;
  entries.read(name, tensor, /*is_buffer=*/true);
  return tensor;
}

// One 16 × 16 matrix in 8 × 8 blocks with Adam grafting: 4 blocks, each with an
// L and an R of 8 × 8 (2048 bytes of factors in float32, as many of roots) and an
// M and an A of 8 × 8 (2048 bytes). Halving one part saves 1024 bytes.
TEST(StatePrecision, BFloat16StateIsHalfTheBytesOfEachPart) {
  auto param = at::randn({16, 16}).set_requires_grad(true);
  const auto options = DashOptions(0.01).block_size(8);
  auto bytes = [&](const DashOptions& o) { return Dash({param}, o).state_bytes(); };
  const auto float32 = bytes(options);
  EXPECT_EQ(float32 - bytes(DashOptions(options).factor_precision(kBF16)), 1024);
  EXPECT_EQ(float32 - bytes(DashOptions(options).root_precision(kBF16)), 1024);
  EXPECT_EQ(float32 - bytes(DashOptions(options).moment_precision(kBF16)), 1024);
  EXPECT_EQ(float32 - bytes(bf16_state(options)), 3072);
}

// L_t = bf16(β L_{t−1} + (1 − β) G_t G_tᵀ): the EMA of the stored (rounded) factor,
// rounded once. The reference forms it in float64 from the same gradients; dash's
// float32 sum may round to the neighbouring bfloat16 number where the float64 one
// lies next to a rounding boundary, so the check is one bfloat16 step (2⁻⁸).
TEST(StatePrecision, BFloat16FactorsAreTheEmaRoundedOncePerStep) {
  auto param = at::zeros({8, 8}).set_requires_grad(true);
  const double beta = 0.95;
  Dash optimizer({param}, DashOptions(0.01).block_size(8).start_step(100).beta_factor(beta).factor_precision(kBF16));
  auto generator = at::detail::createCPUGenerator(4);
  auto reference = at::zeros({8, 8}, at::kDouble);
  for (int step = 0; step < 6; ++step) {
    auto grad = at::randn({8, 8}, generator) * (1.0 + step);
    param.mutable_grad() = grad;
    optimizer.step();
    const auto g = grad.to(at::kDouble);
    reference = (beta * reference + (1.0 - beta) * g.mm(g.t())).to(at::kBFloat16).to(at::kDouble);
    const auto stored = saved_state(optimizer, 0, "block.0.factor_left");
    ASSERT_EQ(stored.scalar_type(), at::kBFloat16) << "stored in bfloat16";
    const auto left = stored.to(at::kDouble);
    EXPECT_TRUE((left - reference).abs().le(reference.abs() * std::ldexp(1.0, -8) + 1e-30).all().item<bool>())
        << "step " << step + 1 << ": largest difference " << (left - reference).abs().max().item<double>();
    reference = left;  // the next EMA starts from what dash stored
  }
}

// Ragged shapes (tiling and not, 4-D, one row, 1-D, 0-D) with momentum and decay.
std::vector<at::Tensor> model_parameters() {
  auto generator = at::detail::createCPUGenerator(11);
  std::vector<at::Tensor> params = {at::randn({40, 37}, generator), at::randn({24, 16}, generator),
      at::randn({5, 3, 2, 2}, generator), at::randn({13}, generator), at::randn({}, generator)};
  for (auto& p : params) p.set_requires_grad(true);
  return params;
}

// Twins with float32 and `other` state on the same gradients: how far the other's
// parameters moved from the float32 twin's, relative to how far those moved.
double relative_drift(const DashOptions& float32, const DashOptions& other, int steps,
    const std::function<void(int, Dash&)>& before_step = nullptr) {
  auto reference = model_parameters();
  auto params = model_parameters();
  std::vector<at::Tensor> initial;
  for (const auto& p : reference) initial.push_back(p.detach().clone());
  Dash reference_optimizer(reference, float32);
  Dash optimizer(params, other);
  auto generator = at::detail::createCPUGenerator(5);
  for (int step = 0; step < steps; ++step) {
    if (before_step) before_step(step, optimizer);
    for (size_t i = 0; i < params.size(); ++i) {
      auto grad = reference[i].detach() * 0.3 + at::randn(reference[i].sizes(), generator);
      reference[i].mutable_grad() = grad;
      params[i].mutable_grad() = grad.clone();
    }
    reference_optimizer.step();
    optimizer.step();
  }
  double moved = 0.0;
  double drift = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].isfinite().all().item<bool>());
    moved += (reference[i] - initial[i]).pow(2).sum().item<double>();
    drift += (params[i] - reference[i]).pow(2).sum().item<double>();
  }
  return std::sqrt(drift / moved);
}

DashOptions training_options(RootMethod method) {
  return DashOptions(0.01)
      .block_size(8)
      .start_step(2)
      .root_frequency(2)
      .momentum(0.5)
      .weight_decay(0.1)
      .execution(Execution::Batched)
      .root(testing::solver_options(method));
}

// 20 steps with 10 root computations: bfloat16 state (a rounding of 2⁻⁹ per
// update) moves the parameters within 1 % of float32 state's path (0.2 % measured),
// and each part alone too; a moment that is not written back leaves it (checked by
// mutation), and a root or factor lost or not widened would move them O(1) off.
TEST(StatePrecision, TrainingWithBFloat16StateStaysCloseToFloat32State) {
  for (auto method : testing::converging_solvers()) {
    const auto float32 = training_options(method);
    const double all = relative_drift(float32, bf16_state(float32), 20);
    EXPECT_GT(all, 0.0) << to_string(method) << ": bfloat16 state must round something";
    EXPECT_LT(all, 0.01) << to_string(method);
    for (const auto& part : {DashOptions(float32).factor_precision(kBF16), DashOptions(float32).root_precision(kBF16),
             DashOptions(float32).moment_precision(kBF16)}) {
      EXPECT_LT(relative_drift(float32, part, 20), 0.01) << to_string(method);
    }
  }
}

// bfloat16 roots with bfloat16 preconditioning are the products' operands: the
// step is the one float32 roots rounded per step would make, as long as the roots
// were computed alike (the same bfloat16 numbers either way).
TEST(StatePrecision, BFloat16RootsAreTheOperandsOfBFloat16Preconditioning) {
  // B = 64: LibTorch's CPU bfloat16 bmm rounds small products batch-dependently.
  auto options = training_options(RootMethod::EVD).block_size(64).preconditioning_precision(kBF16);
  auto reference = at::randn({64, 64}).set_requires_grad(true);
  auto param = reference.detach().clone().set_requires_grad(true);
  Dash reference_optimizer({reference}, options);
  Dash optimizer({param}, DashOptions(options).root_precision(kBF16));
  for (int step = 0; step < 6; ++step) {
    auto grad = at::randn({64, 64});
    reference.mutable_grad() = grad;
    param.mutable_grad() = grad.clone();
    reference_optimizer.step();
    optimizer.step();
    ASSERT_TRUE(at::equal(param, reference)) << "step " << step + 1;
  }
  EXPECT_EQ(optimizer.diagnostics().workspace_bytes < reference_optimizer.diagnostics().workspace_bytes, true)
      << "no rounded copy of the roots kept";
}

// The precision may change between steps: the state is converted at the next step
// (its bytes follow), and training goes on as with that precision from the start,
// up to the one rounding of the state at the change.
TEST(StatePrecision, ChangingThePrecisionConvertsTheState) {
  const auto float32 = training_options(RootMethod::EVD);
  int64_t bytes_before = 0;
  int64_t bytes_after = 0;
  const double drift = relative_drift(float32, float32, 20, [&](int step, Dash& optimizer) {
    if (step == 7) bytes_before = optimizer.state_bytes();
    if (step != 8 && step != 14) return;
    for (auto& group : optimizer.param_groups()) {
      auto& options = static_cast<DashOptions&>(group.options());
      options.factor_precision(step == 8 ? kBF16 : MatmulPrecision::FP32)
          .root_precision(step == 8 ? kBF16 : MatmulPrecision::FP32)
          .moment_precision(step == 8 ? kBF16 : MatmulPrecision::FP32);
    }
    if (step == 14) bytes_after = optimizer.state_bytes();
  });
  EXPECT_LT(bytes_after, bytes_before) << "bfloat16 from step 9 to 14";
  EXPECT_GT(drift, 0.0);
  EXPECT_LT(drift, 0.01);
}

TEST(StatePrecision, FP16StateIsRefusedByName) {
  auto param = at::randn({8, 8}).set_requires_grad(true);
  for (const std::string name : {"factor_precision", "root_precision", "moment_precision"}) {
    auto options = DashOptions();
    if (name == "factor_precision") options.factor_precision(MatmulPrecision::FP16);
    if (name == "root_precision") options.root_precision(MatmulPrecision::FP16);
    if (name == "moment_precision") options.moment_precision(MatmulPrecision::FP16);
    const auto message = testing::error_of([&] { Dash optimizer({param}, options); });
    EXPECT_NE(message.find(name + " fp16 is not supported"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace dash
