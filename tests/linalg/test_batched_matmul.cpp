// The matmul layer (src/linalg/batched_matmul.h): matmul_add_ against float64
// products, c ← βc + α·a·b in every precision, with β = 0 ignoring what c held (a
// fresh Scratch buffer's garbage, here NaN), as BLAS does; 16-bit products kept in
// 16 bits lose nothing; the diagonal gets constants exactly; and the solvers copy
// the stack only where their arithmetic needs it.

#include "linalg/batched_matmul.h"
#include "linalg/solvers.h"
#include "kernels/stack_blas.h"

#include "support/spd_matrices.h"
#include "support/top_level_ops.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dash::linalg {
namespace {

// Sizes 3 and 8: LibTorch's CPU backend computes products under 400 multiply-adds
// in a loop of its own, which would read c even at β = 0.
TEST(BatchedMatmul, MatmulAddFollowsBetaAndAlphaAndIgnoresCWhenBetaIsZero) {
  auto generator = at::detail::createCPUGenerator(5);
  for (int64_t size : {3, 8}) {
    const auto a = at::randn({3, size, size}, generator);
    const auto b = at::randn({3, size, size}, generator);
    const auto c0 = at::randn({3, size, size}, generator);
    const auto product = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
      // 16-bit operands: 8 products of numbers rounded to 2^-11 or 2^-8, relative.
      const double tolerance = precision == MatmulPrecision::FP32   ? 1e-5
                               : precision == MatmulPrecision::FP16 ? 2e-2
                                                                    : 1e-1;
      kernels::Scratch scratch;
      for (double beta : {0.0, 1.0, 0.5}) {
        for (double alpha : {-0.75, 1.0}) {
          auto c = beta == 0.0 ? at::full({3, size, size}, std::numeric_limits<float>::quiet_NaN()) : c0.clone();
          matmul_add_(c, a, b, beta, alpha, precision, scratch);
          const auto expected = (beta == 0.0 ? at::zeros_like(product) : beta * c0.to(at::kDouble)) + alpha * product;
          const double error = (c.to(at::kDouble) - expected).abs().max().item<double>();
          EXPECT_LE(error, tolerance * product.abs().max().item<double>())
              << "size " << size << ", precision " << static_cast<int>(precision) << ", beta " << beta << ", alpha "
              << alpha;
        }
      }
    }
  }
}

// Product::Symmetric for commuting symmetric operands: in every precision, through
// operand_matmul and matmul_add_ (β = 0 over NaN, and β ≠ 0), the same product as
// Product::General to rounding, and exactly symmetric in float32 wherever this
// CPU computes one triangle (kernels/stack_blas.h).
TEST(OperandMatmul, SymmetricProductsAreTheProduct) {
  const auto spectrum = testing::log_spaced_spectrum(3, 70, 50.0, 21);
  const auto a = spectrum.matrices.to(at::kFloat);
  const auto b =
      at::matmul(spectrum.vectors * at::linspace(0.5, 2.0, 70, at::kDouble), spectrum.vectors.transpose(1, 2))
          .to(at::kFloat);
  const auto exact = at::matmul(spectrum.matrices, b.to(at::kDouble));
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
    const auto label = "precision " + std::to_string(static_cast<int>(precision));
    const double tolerance = 70.0 * 4.0 * operand_roundoff(precision) * exact.abs().max().item<double>();
    kernels::Scratch scratch;
    const auto general = operand_matmul(a, b, precision, scratch, 0.5).to(at::kDouble);
    const auto symmetric = operand_matmul(a, b, precision, scratch, 0.5, Product::Symmetric);
    EXPECT_LE((symmetric.to(at::kDouble) - 0.5 * exact).abs().max().item<double>(), tolerance) << label;
    EXPECT_LE((general - 0.5 * exact).abs().max().item<double>(), tolerance) << label;
    for (double beta : {0.0, 1.0}) {
      auto c = beta == 0.0 ? at::full_like(a, std::numeric_limits<float>::quiet_NaN()) : a.clone();
      matmul_add_(c, a, b, beta, -1.0, precision, scratch, Product::Symmetric);
      const auto expected = beta * spectrum.matrices - exact;
      EXPECT_LE((c.to(at::kDouble) - expected).abs().max().item<double>(), 2.0 * tolerance)
          << label << ", beta " << beta;
      if (precision == MatmulPrecision::FP32 && kernels::stack_symmetric_product_plan(a.device()).one_triangle) {
        EXPECT_TRUE(at::equal(c, c.transpose(1, 2))) << label << ", beta " << beta;
        EXPECT_TRUE(at::equal(symmetric, symmetric.transpose(1, 2))) << label;
      }
    }
  }
}

// A 16-bit bmm rounds its result to 16 bits, so the product kept there is the
// product in float32, and a chain of products comes out bit for bit the same.
TEST(OperandMatmul, SixteenBitProductsLoseNothingInTheOperandDtype) {
  auto generator = at::detail::createCPUGenerator(7);
  const auto a = at::randn({2, 16, 16}, generator);
  const auto b = at::randn({2, 16, 16}, generator);
  const auto c = at::randn({2, 16, 16}, generator);
  for (auto precision : {MatmulPrecision::FP16, MatmulPrecision::BF16}) {
    const auto label = "precision " + std::to_string(static_cast<int>(precision));
    kernels::Scratch scratch;
    const auto kept = operand_matmul(a, b, precision, scratch);
    EXPECT_EQ(kept.scalar_type(), operand_dtype(precision, at::kFloat)) << label;
    const auto widened_product = matmul(a, b, precision, scratch);
    EXPECT_EQ(widened_product.scalar_type(), at::kFloat) << label;
    EXPECT_TRUE(at::equal(kept.to(at::kFloat), widened_product)) << label;
    // Rounding the widened product again changes nothing.
    EXPECT_TRUE(at::equal(widened_product.to(kept.scalar_type()), kept)) << label;
    EXPECT_TRUE(at::equal(matmul(kept, c, precision, scratch), matmul(widened_product, c, precision, scratch)))
        << label;
    // An operand already in 16 bits is used as it is, not copied.
    EXPECT_EQ(as_operand(kept, precision, scratch).data_ptr(), kept.data_ptr()) << label;
    // Against float64: 16 products of operands rounded to 2^-11 or 2^-8, relative.
    const auto exact = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
    const double error = (kept.to(at::kDouble) - exact).abs().max().item<double>();
    EXPECT_LE(error, 16.0 * 4.0 * operand_roundoff(precision) * exact.abs().max().item<double>()) << label;
  }
  kernels::Scratch scratch;
  EXPECT_EQ(as_operand(a, MatmulPrecision::FP32, scratch).data_ptr(), a.data_ptr());
  EXPECT_EQ(operand_matmul(a, b, MatmulPrecision::FP32, scratch).scalar_type(), at::kFloat);
}

// alpha scales inside the product and, like β = 0, never reads the buffer the
// product goes to: here ones left full of NaN, at sizes on both sides of LibTorch's
// small-product cut-off. In 16 bits the scaled product is rounded once (above the
// cut-off, where the backend accumulates in float32): it matches
// the exact product of the rounded operands, scaled and rounded, where rounding
// the product before scaling would miss about a quarter of the entries.
TEST(OperandMatmul, ScaledProductsAreRoundedOnceAndIgnoreTheBuffer) {
  auto generator = at::detail::createCPUGenerator(9);
  for (int64_t size : {3, 7, 16}) {
    const auto a = at::randn({2, size, size}, generator);
    const auto b = at::randn({2, size, size}, generator);
    for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
      const auto label = "size " + std::to_string(size) + ", precision " + std::to_string(static_cast<int>(precision));
      const auto dtype = operand_dtype(precision, at::kFloat);
      kernels::Scratch scratch;
      // Three buffers of each dtype (the rounded operands, the product, the float32
      // emulation), all NaN, then released for the product to take.
      std::vector<at::Tensor> held;
      for (auto type : {dtype, at::kFloat}) {
        for (int i = 0; i < 3; ++i) {
          held.push_back(
              scratch.empty({2, size, size}, a.options().dtype(type)).fill_(std::numeric_limits<float>::quiet_NaN()));
        }
      }
      held.clear();
      const auto scaled = operand_matmul(a, b, precision, scratch, -0.3);
      EXPECT_EQ(scaled.scalar_type(), dtype) << label;
      const auto exact = -0.3 * at::matmul(a.to(dtype).to(at::kDouble), b.to(dtype).to(at::kDouble));
      // (LibTorch 1.13's CPU loop for products under its cut-off accumulates bf16
      // in bf16, so there only an accumulation bound holds.)
      const bool bounded_only = precision == MatmulPrecision::FP32 || size * size * size < 400;
      ASSERT_TRUE(at::isfinite(scaled).all().item<bool>()) << label;
      if (bounded_only) {
        const double roundoff = precision == MatmulPrecision::FP32 ? 1e-6 : operand_roundoff(precision);
        const double error = (scaled.to(at::kDouble) - exact).abs().max().item<double>();
        EXPECT_LE(error, 4.0 * static_cast<double>(size) * roundoff * exact.abs().max().item<double>()) << label;
      } else {
        const auto mismatches = scaled.ne(exact.to(dtype)).sum().item<int64_t>();
        EXPECT_LE(mismatches, scaled.numel() / 50) << label;
      }
    }
  }
}

// A float32 constant is added to a 16-bit diagonal in float32, the sum rounded
// once (the constant is not rounded to 16 bits first); the rest of the matrix is
// untouched.
TEST(OperandMatmul, DiagonalConstantsAreAddedInTheirOwnPrecision) {
  auto generator = at::detail::createCPUGenerator(13);
  const auto t = at::randn({3, 8, 8}, generator).to(at::kBFloat16);
  const auto values = at::full({8}, 1.0 + 1.0 / 3.0);  // not representable in bfloat16
  kernels::Scratch scratch;
  auto sum = t.clone();
  add_to_diagonal(sum, values, scratch);
  const auto expected_diagonal = (t.to(at::kDouble).diagonal(0, -2, -1) + values.to(at::kDouble)).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(sum.diagonal(0, -2, -1), expected_diagonal));
  const auto off_diagonal = 1 - at::eye(8, at::kBool).to(at::kInt);
  EXPECT_TRUE(at::equal(sum * off_diagonal, t * off_diagonal));
  // Same dtype: a plain in-place add.
  auto wide = t.to(at::kFloat);
  add_to_diagonal(wide, values, scratch);
  EXPECT_TRUE(at::allclose(wide.diagonal(0, -2, -1), t.to(at::kFloat).diagonal(0, -2, -1) + values));
}

// Copies of a whole stack (dtype conversions among them) that the code under test
// dispatches itself while `run` runs: top-level aten::copy_ and aten::to calls on
// tensors of at least `numel` elements, not those inside another op, nor the
// (N, b) copies of a diagonal.
int64_t stack_copies_during(int64_t numel, const std::function<void()>& run) {
  int64_t copies = 0;
  testing::for_each_top_level_op(
      [&](const at::RecordFunction& fn) {
        if (std::strcmp(fn.name(), "aten::copy_") != 0 && std::strcmp(fn.name(), "aten::to") != 0) return;
        const auto inputs = fn.inputs();
        if (!inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().numel() >= numel) ++copies;
      },
      run);
  return copies;
}

// Passes that copy the whole stack, per step. Every matmul used to cast both
// operands to 16 bits and widen its result back (9 passes per NDB step, 12 per
// coupled Newton step at p = 4). Now NDB's iterates stay in 16 bits and c₁, c₀ go
// into the product and onto the diagonal: none. Coupled Newton copies M' into N:
// one, in any precision. Clenshaw's sum stays in float32 (the recurrence
// subtracts nearly equal terms): in 16 bits it rounds b_{k+1} for the product,
// and on a CPU widens the product before adding it (ATen's CPU kernels cannot
// read 16 bits on the fly), two.
TEST(OperandMatmul, SolversCopyTheStackAtMostAsOftenAsTheirArithmeticNeeds) {
  const auto normalized = testing::log_spaced_spectrum(3, 24, 1e2, 11).matrices.to(at::kFloat);
  const auto epsilon = at::zeros({3, 1, 1});
  // (Not FP16: this LibTorch's CPU backend has no float16 bmm, and its emulation
  // converts inside every product.)
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16}) {
    kernels::Scratch scratch;
    auto per_step = [&](const std::function<void(int64_t)>& solve) {
      solve(12);  // fills the Scratch
      return (stack_copies_during(normalized.numel(), [&] { solve(12); }) -
                 stack_copies_during(normalized.numel(), [&] { solve(8); })) /
             4.0;
    };
    const auto ndb = per_step([&](int64_t steps) {
      (void)newton_db_root(normalized.clone(), 2, NewtonOptions().steps(steps), NewtonDBOptions(), precision, scratch);
    });
    const auto cn = per_step([&](int64_t steps) {
      (void)coupled_newton_root(normalized, 4, NewtonOptions().steps(steps), precision, scratch);
    });
    const auto chebyshev = per_step([&](int64_t degree) {
      (void)chebyshev_root(normalized, epsilon, 4, ChebyshevOptions().degree(degree), precision, scratch);
    });
    const auto label = "precision " + std::to_string(static_cast<int>(precision));
    EXPECT_EQ(ndb, 0.0) << label;
    EXPECT_EQ(cn, 1.0) << label;
    EXPECT_EQ(chebyshev, precision == MatmulPrecision::FP32 ? 0.0 : 2.0) << label;
  }
}

}  // namespace
}  // namespace dash::linalg
