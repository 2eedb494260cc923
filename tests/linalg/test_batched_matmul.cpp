// matmul_add_ (src/linalg/batched_matmul.h) against float64 products: c ← βc + α·a·b
// in every precision, and β = 0 ignores what c held (a fresh Scratch buffer's
// garbage, here NaN), as BLAS does.

#include "linalg/batched_matmul.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <limits>

namespace dash::linalg {
namespace {

TEST(BatchedMatmul, MatmulAddFollowsBetaAndAlphaAndIgnoresCWhenBetaIsZero) {
  auto generator = at::detail::createCPUGenerator(5);
  const auto a = at::randn({3, 8, 8}, generator);
  const auto b = at::randn({3, 8, 8}, generator);
  const auto c0 = at::randn({3, 8, 8}, generator);
  const auto product = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
    // 16-bit operands: 8 products of numbers rounded to 2^-11 or 2^-8, relative.
    const double tolerance = precision == MatmulPrecision::FP32   ? 1e-5
                             : precision == MatmulPrecision::FP16 ? 2e-2
                                                                  : 1e-1;
    Scratch scratch;
    for (double beta : {0.0, 1.0, 0.5}) {
      auto c = beta == 0.0 ? at::full({3, 8, 8}, std::numeric_limits<float>::quiet_NaN()) : c0.clone();
      matmul_add_(c, a, b, beta, -0.75, precision, scratch);
      const auto expected = (beta == 0.0 ? at::zeros_like(product) : beta * c0.to(at::kDouble)) - 0.75 * product;
      const double error = (c.to(at::kDouble) - expected).abs().max().item<double>();
      EXPECT_LE(error, tolerance * product.abs().max().item<double>())
          << "precision " << static_cast<int>(precision) << ", beta " << beta;
    }
  }
}

}  // namespace
}  // namespace dash::linalg
