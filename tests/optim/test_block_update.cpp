// The per-block arithmetic of a step (src/optim/block_update.h, and root-inverse
// Shampoo's, src/optim/families/shampoo_arithmetic.h) against the spec's formulas
// (../shared/dash-algorithm.md §4, steps 2–8) written out independently in float64
// on a few random blocks.

#include "optim/block_update.h"
#include "optim/families/shampoo_arithmetic.h"
#include "kernels/fused_moments.h"
#include "optim/grafting.h"
#include "support/grafting_reference.h"
#include "support/spd_matrices.h"

#include "kernels/stack_blas.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <gtest/gtest.h>

#include <cmath>

namespace dash::optim {
namespace {

using testing::max_difference;

// Step 7 as the engine runs it for Shampoo: U = L̄ Ĝ R̄, rescaled to the grafting norm.
at::Tensor preconditioned_direction(Workspace& work, const at::Tensor& left_root, const at::Tensor& right_root,
    GraftingType grafting, double scale = 1.0) {
  return grafted(work, shampoo_direction(work, left_root, right_root), grafting, scale);
}

class BlockUpdate : public ::testing::Test {
 protected:
  at::Generator generator_ = at::detail::createCPUGenerator(17);
  at::Tensor random(std::vector<int64_t> shape) { return at::randn(shape, generator_); }
};

// Step 2: L ← β L + (1 − β) G Gᵀ, R ← β R + (1 − β) Gᵀ G; β = 1 adds. Factors
// are symmetric, and stay so exactly.
TEST_F(BlockUpdate, FactorsFollowTheirExponentialAverage) {
  auto grad = random({3, 5, 4});
  auto g = grad.to(at::kDouble);
  for (double beta : {0.95, 1.0}) {
    auto symmetric = [&](int64_t size) {
      auto a = random({3, size, size});
      return a + a.transpose(1, 2);
    };
    auto left = symmetric(5);
    auto right = symmetric(4);
    const auto expected_left = (beta == 1.0 ? 1.0 : beta) * left.to(at::kDouble) +
                               (beta == 1.0 ? 1.0 : 1.0 - beta) * at::matmul(g, g.transpose(1, 2));
    const auto expected_right = (beta == 1.0 ? 1.0 : beta) * right.to(at::kDouble) +
                                (beta == 1.0 ? 1.0 : 1.0 - beta) * at::matmul(g.transpose(1, 2), g);
    accumulate_factor(left, grad, /*left=*/true, beta);
    accumulate_factor(right, grad, /*left=*/false, beta);
    EXPECT_LE(max_difference(left, expected_left), 1e-5) << "beta " << beta;
    EXPECT_LE(max_difference(right, expected_right), 1e-5) << "beta " << beta;
    if (kernels::stack_syrk_plan(left.device()).one_triangle) {
      EXPECT_TRUE(at::equal(left, left.transpose(1, 2))) << "beta " << beta;
      EXPECT_TRUE(at::equal(right, right.transpose(1, 2))) << "beta " << beta;
    }
  }
}

// The fused pass over a stack that the CPU splits into many ranges, cut inside
// blocks of an odd size, each block at its own step: every element gets its own
// block's bias corrections. Against float64 and against the unfused path, which
// a non-contiguous copy of the same gradient takes.
TEST_F(BlockUpdate, FusedGraftingUsesEachBlocksBiasCorrectionAcrossThreadRanges) {
  const std::vector<int64_t> shape{7, 129, 257};  // 232 k elements, 33 k per block
  auto grad = random(shape);
  MomentState fused{random(shape), random(shape).abs(), at::Tensor(), at::arange(1, 8, at::kFloat).view({7, 1, 1})};
  MomentState unfused{fused.grad_ema.clone(), fused.graft_stat.clone(), at::Tensor(), fused.steps.clone()};
  MomentState split{fused.grad_ema.clone(), fused.graft_stat.clone(), at::Tensor(), fused.steps.clone()};
  const auto m = fused.grad_ema.to(at::kDouble);
  const auto a = fused.graft_stat.to(at::kDouble);
  StepHyper hyper;  // Adam with bias correction
  auto fused_work = Workspace::like(grad);
  auto unfused_work = Workspace::like(grad);
  auto split_work = Workspace::like(grad);
  // The fused pass with `threads` ATen threads, whatever the machine has.
  auto fused_with_threads = [&](int threads, MomentState& state, Workspace& work) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    const bool ran = grafting_for(hyper.grafting).fused_step(grad, state, hyper, work.ghat, work.graft);
    at::set_num_threads(before);
    return ran;
  };
  // Four: ATen's ranges then start inside blocks.
  ASSERT_TRUE(fused_with_threads(4, fused, fused_work));
  // One: ranges of whole blocks over the cores instead (kernels::for_each_pass_range;
  // 6.5 MB of traffic makes two). Element-wise, so bit for bit the same.
  ASSERT_TRUE(fused_with_threads(1, split, split_work));
  EXPECT_TRUE(at::equal(split_work.graft, fused_work.graft));
  EXPECT_TRUE(at::equal(split_work.ghat, fused_work.ghat));
  EXPECT_TRUE(at::equal(split.grad_ema, fused.grad_ema));
  EXPECT_TRUE(at::equal(split.graft_stat, fused.graft_stat));
  grafting_direction(grad.transpose(1, 2).contiguous().transpose(1, 2), unfused, hyper, unfused_work);

  const auto expected = testing::expected_grafting(grad.to(at::kDouble), m, a, fused.steps, hyper);
  // Per block, relative in the Frobenius norm: a block read with a neighbour's t
  // would be off by 5–90 % (the bias corrections of t = 1…7).
  auto relative = [](const at::Tensor& value, const at::Tensor& reference) {
    const auto r = reference.to(at::kDouble);
    const auto error = at::linalg_vector_norm(value.to(at::kDouble) - r, 2, {1, 2});
    return (error / at::linalg_vector_norm(r, 2, {1, 2})).max().item<double>();
  };
  EXPECT_LE(relative(fused_work.graft, expected.graft), 1e-6);
  EXPECT_LE(relative(fused_work.ghat, expected.ghat), 1e-6);
  EXPECT_LE(relative(fused.graft_stat, expected.a), 1e-6);
  EXPECT_LE(relative(fused_work.graft, unfused_work.graft), 1e-6);
  EXPECT_LE(relative(fused.grad_ema, unfused.grad_ema), 1e-6);
}

// The CUDA kernel against the CPU loop (same per-element arithmetic: they agree to
// rounding), on the shapes of the test above. Skipped without a CUDA device.
TEST_F(BlockUpdate, FusedGraftingOnCudaMatchesTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(kernels::cuda_kernels_built()) << "a CUDA LibTorch built without dash's CUDA kernels";
  const std::vector<int64_t> shape{7, 129, 257};
  auto grad = random(shape);
  MomentState cpu{random(shape), random(shape).abs(), at::Tensor(), at::arange(1, 8, at::kFloat).view({7, 1, 1})};
  MomentState cuda{cpu.grad_ema.cuda(), cpu.graft_stat.cuda(), at::Tensor(), cpu.steps.cuda()};
  for (auto grafting : {GraftingType::Adam, GraftingType::AdaGrad}) {
    StepHyper hyper;
    hyper.grafting = grafting;
    auto cpu_work = Workspace::like(grad);
    auto cuda_work = Workspace::like(grad.cuda());
    grafting_direction(grad, cpu, hyper, cpu_work);
    const auto where = ::testing::Message() << "grafting " << static_cast<int>(grafting);
    ASSERT_TRUE(grafting_for(grafting).fused_step(grad.cuda(), cuda, hyper, cuda_work.ghat, cuda_work.graft)) << where;
    EXPECT_LE(max_difference(cuda.grad_ema.cpu(), cpu.grad_ema), 1e-6) << where;
    EXPECT_LE(max_difference(cuda.graft_stat.cpu(), cpu.graft_stat), 1e-5) << where;
    EXPECT_LE(max_difference(cuda_work.ghat.cpu(), cpu_work.ghat), 1e-5) << where;
    EXPECT_LE(
        ((cuda_work.graft.cpu() - cpu_work.graft).abs() / (cpu_work.graft.abs() + 1.0)).max().item<double>(), 1e-5)
        << where;
  }
}

// The step takes the fused pass for the graftings with a second-moment statistic on
// contiguous stacks with per-block step counts, and nowhere else (SGD and None have
// no statistic; AdamW segments count steps per element; a non-contiguous gradient is
// a strided view).
TEST_F(BlockUpdate, FusedStepRunsExactlyWhereItCan) {
  for (auto grafting : kGraftingTypes) {
    const auto& type = grafting_for(grafting);
    const bool second_moment = type.keeps_statistic();
    StepHyper hyper;
    hyper.grafting = grafting;
    auto fresh_state = [&](std::vector<int64_t> steps_shape) {
      return MomentState{random({2, 3, 4}), second_moment ? random({2, 3, 4}).abs() : at::Tensor(), at::Tensor(),
          at::full(steps_shape, 2.0)};
    };
    auto work = Workspace::like(at::empty({2, 3, 4}));
    auto state = fresh_state({2, 1, 1});
    EXPECT_EQ(type.fused_step(random({2, 3, 4}), state, hyper, work.ghat, work.graft), second_moment)
        << to_string(grafting);
    state = fresh_state({2, 1, 1});
    EXPECT_FALSE(type.fused_step(random({2, 4, 3}).transpose(1, 2), state, hyper, work.ghat, work.graft))
        << "non-contiguous gradient, grafting " << to_string(grafting);
    state = fresh_state({2, 3, 4});
    EXPECT_FALSE(type.fused_step(random({2, 3, 4}), state, hyper, work.ghat, work.graft))
        << "per-element step counts, grafting " << to_string(grafting);
  }
}

// The fused pass refuses what its kernels cannot take, so the step falls back.
TEST_F(BlockUpdate, FusedGraftingRefusesLayoutsItCannotTake) {
  auto grad = random({2, 3, 4});
  auto ema = random({2, 3, 4});
  auto stat = random({2, 3, 4}).abs();
  auto ghat = at::empty_like(grad);
  auto graft = at::empty_like(grad);
  const auto per_block = at::ones({2, 1, 1});
  EXPECT_TRUE(kernels::fused_second_moment_supported(grad, ema, stat, per_block, at::Tensor(), ghat, graft));
  EXPECT_FALSE(kernels::fused_second_moment_supported(grad, ema, stat, at::ones({2, 3, 4}), per_block, ghat, graft))
      << "per-element bias corrections";
  EXPECT_FALSE(kernels::fused_second_moment_supported(grad, ema, stat, per_block, per_block, grad, graft))
      << "an output over an input";
  EXPECT_FALSE(kernels::fused_second_moment_supported(grad, ema, stat, per_block, per_block, ghat, ghat))
      << "both outputs in one buffer";
  EXPECT_FALSE(kernels::fused_second_moment_supported(grad, ema, ema, per_block, per_block, ghat, graft))
      << "M and A in one buffer";
  EXPECT_FALSE(
      kernels::fused_second_moment_supported(grad.to(at::kDouble), ema, stat, per_block, per_block, ghat, graft))
      << "float64";
  EXPECT_FALSE(kernels::fused_second_moment_supported(
      grad, ema.transpose(1, 2).contiguous().transpose(1, 2), stat, per_block, per_block, ghat, graft))
      << "non-contiguous";
  kernels::SecondMomentCoefficients coefficients;
  EXPECT_THROW(
      kernels::fused_second_moment_step(grad, ema, stat, at::ones({2, 3, 4}), per_block, coefficients, ghat, graft),
      c10::Error);
}

// Step 7: U = L̄ Ĝ R̄, rescaled per block to ‖P_g‖_F; one-sided: U = L̄ Ĝ; no
// grafting: U itself.
TEST_F(BlockUpdate, PreconditionedDirectionTakesTheGraftingNormPerBlock) {
  auto left = random({2, 3, 3});
  auto right = random({2, 4, 4});
  auto work = Workspace::like(at::empty({2, 3, 4}));
  work.ghat.copy_(random({2, 3, 4}));
  work.graft.copy_(random({2, 3, 4}));
  const auto ghat = work.ghat.to(at::kDouble).clone();
  const auto graft_norms = at::linalg_vector_norm(work.graft.to(at::kDouble), 2, {1, 2}, true);
  const auto u = at::matmul(at::matmul(left.to(at::kDouble), ghat), right.to(at::kDouble));
  const auto expected = u * graft_norms / (at::linalg_vector_norm(u, 2, {1, 2}, true) + 1e-16);
  EXPECT_LE(max_difference(preconditioned_direction(work, left, right, GraftingType::Adam), expected), 1e-5);

  work.ghat.copy_(ghat);
  EXPECT_LE(max_difference(preconditioned_direction(work, left, right, GraftingType::None), u), 1e-5);

  work.ghat.copy_(ghat);
  const auto one_sided = at::matmul(left.to(at::kDouble), ghat);
  const auto expected_one_sided =
      one_sided * graft_norms / (at::linalg_vector_norm(one_sided, 2, {1, 2}, true) + 1e-16);
  EXPECT_LE(
      max_difference(preconditioned_direction(work, left, at::Tensor(), GraftingType::Adam), expected_one_sided), 1e-5);

  // A scale (the learning rate) multiplies the result, with and without rescaling.
  work.ghat.copy_(ghat);
  EXPECT_LE(
      max_difference(preconditioned_direction(work, left, right, GraftingType::Adam, 0.25), 0.25 * expected), 1e-5);
  work.ghat.copy_(ghat);
  EXPECT_LE(max_difference(preconditioned_direction(work, left, right, GraftingType::None, 0.25), 0.25 * u), 1e-5);
}

// The grafting norms and the rescale on a stack large enough (5 MB) to be split
// over the cores where ATen's pool has one thread: each block keeps its own norm.
TEST_F(BlockUpdate, PreconditionedDirectionOverTheCoresKeepsEachBlocksNorm) {
  const int64_t blocks = 20, size = 256;
  auto left = random({blocks, size, size}).div_(16.0);
  auto right = random({blocks, size, size}).div_(16.0);
  auto work = Workspace::like(at::empty({blocks, size, size}));
  work.ghat.copy_(random({blocks, size, size}));
  // Graft norms 1…20: a block scaled with a neighbour's would be off by 5 % or more.
  work.graft.copy_(random({blocks, size, size}));
  work.graft.div_(at::linalg_vector_norm(work.graft, 2, {1, 2}, true)).mul_(at::arange(1, blocks + 1).view({-1, 1, 1}));
  const auto u = at::matmul(at::matmul(left.to(at::kDouble), work.ghat.to(at::kDouble)), right.to(at::kDouble));
  const auto expected =
      u * at::arange(1, blocks + 1, at::kDouble).view({-1, 1, 1}) / at::linalg_vector_norm(u, 2, {1, 2}, true);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto direction = preconditioned_direction(work, left, right, GraftingType::Adam);
  at::set_num_threads(threads);
  const auto error = at::linalg_vector_norm(direction.to(at::kDouble) - expected, 2, {1, 2});
  EXPECT_LE((error / at::linalg_vector_norm(expected, 2, {1, 2})).max().item<double>(), 1e-5);
}

// Step 7 with bfloat16 operands (preconditioning_precision BF16): the roots come
// rounded, Ĝ and the products are rounded inside, and P comes back in float32
// within a few bfloat16 roundings of the float64 formula, both sides and one.
// The lower bound shows that the products were rounded (a float32 product is
// ~1e-7 off).
TEST_F(BlockUpdate, PreconditionedDirectionInBFloat16) {
  const auto left = random({3, 24, 24});
  const auto right = random({3, 40, 40});
  const auto ghat = random({3, 24, 40});
  const auto graft = random({3, 24, 40});
  const auto graft_norms = at::linalg_vector_norm(graft.to(at::kDouble), 2, {1, 2}, true);
  for (bool two_sided : {true, false}) {
    auto work = Workspace::like(ghat);
    work.ghat.copy_(ghat);
    work.graft.copy_(graft);
    work.ghat_operand = at::empty_like(ghat, ghat.options().dtype(at::kBFloat16));
    work.product_operand = at::empty_like(work.ghat_operand);
    auto u = at::matmul(left.to(at::kDouble), ghat.to(at::kDouble));
    if (two_sided) u = at::matmul(u, right.to(at::kDouble));
    const auto expected = u * graft_norms / at::linalg_vector_norm(u, 2, {1, 2}, true);
    const auto direction = preconditioned_direction(
        work, left.to(at::kBFloat16), two_sided ? right.to(at::kBFloat16) : at::Tensor(), GraftingType::Adam, 0.5);
    EXPECT_EQ(direction.scalar_type(), at::kFloat);
    const auto relative = (at::linalg_vector_norm(direction.to(at::kDouble) - 0.5 * expected, 2, {1, 2}) /
                           at::linalg_vector_norm(0.5 * expected, 2, {1, 2}))
                              .max()
                              .item<double>();
    EXPECT_LE(relative, 4.0 * std::ldexp(1.0, -8)) << "two-sided " << two_sided;
    EXPECT_GE(relative, 1e-4) << "two-sided " << two_sided;
  }
  auto work = Workspace::like(ghat);
  EXPECT_THROW(
      preconditioned_direction(work, left.to(at::kBFloat16), right.to(at::kBFloat16), GraftingType::Adam), c10::Error)
      << "no operand buffers";
}

// Step 8: B ← μ B + P; heavy ball returns B, Nesterov P + μ B.
TEST_F(BlockUpdate, MomentumIsHeavyBallOrNesterov) {
  for (bool nesterov : {false, true}) {
    auto direction = random({2, 3, 3});
    MomentState state{at::Tensor(), at::Tensor(), random({2, 3, 3}), at::ones({2, 1, 1})};
    const auto buffer = 0.8 * state.momentum.to(at::kDouble) + direction.to(at::kDouble);
    const auto expected = nesterov ? direction.to(at::kDouble) + 0.8 * buffer : buffer;
    StepHyper hyper;
    hyper.momentum = 0.8;
    hyper.nesterov = nesterov;
    const auto result = apply_momentum(direction.clone(), state, hyper);
    EXPECT_LE(max_difference(state.momentum, buffer), 1e-6) << nesterov;
    EXPECT_LE(max_difference(result, expected), 1e-6) << nesterov;
  }
}

}  // namespace
}  // namespace dash::optim
