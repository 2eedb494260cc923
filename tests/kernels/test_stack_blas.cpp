// BLAS over a CPU stack (src/kernels/stack_blas.h): syrk and the symmetric product
// against float64, their results exactly symmetric and the same for a matrix alone
// as in a stack; bmm over ranges; what each refuses, and the plans' reasons.

#include "kernels/cpu_features.h"
#include "kernels/stack_blas.h"
#include "kernels/core_ranges.h"
#include "support/error_message.h"
#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <dash/inverse_root.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <utility>

namespace dash::kernels {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

at::Tensor random_spd_stack(int64_t count, int64_t size) {
  at::manual_seed(7);
  auto g = at::randn({count, size, 2 * size}, at::kFloat);
  return at::bmm(g, g.transpose(1, 2)).div_(2.0 * size).add_(at::eye(size, at::kFloat), 1e-3);
}

// syrk over a stack: β C + α A Aᵀ and β C + α Aᵀ A against float64, C exactly
// symmetric, β = 0 ignoring a C full of NaN; sizes that are not multiples of the
// mirror's 32-wide tiles, and A with a row stride wider than its rows (a slice).
TEST(StackBlas, SyrkMatchesFloat64AndIsExactlySymmetric) {
  const auto plan = kernels::stack_syrk_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  at::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (bool transpose_a : {false, true}) {
      for (double beta : {0.95, 1.0, 0.0}) {
        const auto wide = at::randn({5, 37, 90}, dtype);
        const auto a = wide.narrow(2, 3, 70);  // rows of 70 in rows of 90
        const int64_t n = transpose_a ? 70 : 37;
        auto c = at::randn({5, n, n}, dtype);
        // Rows of n in rows of n + 7: the zeroing and the mirror must follow C's row stride.
        auto c_rows = at::zeros({5, n, n + 7}, dtype);
        c = c_rows.narrow(2, 0, n).copy_(at::bmm(c, c.transpose(1, 2)));
        if (beta == 0.0) c.fill_(std::numeric_limits<double>::quiet_NaN());
        const auto a64 = a.to(at::kDouble);
        const auto gram = transpose_a ? at::bmm(a64.transpose(1, 2), a64) : at::bmm(a64, a64.transpose(1, 2));
        const auto expected = (beta == 0.0 ? at::zeros_like(gram) : beta * c.to(at::kDouble)) + 0.05 * gram;
        ASSERT_TRUE(kernels::stack_syrk_supported(c, a));
        kernels::stack_syrk(c, a, transpose_a, 0.05, beta);
        const double scale = expected.abs().max().item<double>();
        const double tolerance = dtype == at::kFloat ? 1e-6 : 1e-14;
        EXPECT_LT((c.to(at::kDouble) - expected).abs().max().item<double>(), tolerance * scale)
            << dtype << " transpose " << transpose_a << " beta " << beta;
        EXPECT_TRUE(at::equal(c, c.transpose(1, 2))) << dtype << " transpose " << transpose_a << " beta " << beta;
        // The columns past n in C's rows are not C's: untouched.
        EXPECT_EQ(c_rows.narrow(2, n, 7).abs().sum().item<double>(), 0.0);
      }
    }
  }
}

// As for eigh: a matrix's update does not depend on the stack it is in, so batched
// and per-block factors agree bit for bit.
TEST(StackBlas, SyrkGivesEachMatrixWhatItGetsAlone) {
  const auto plan = kernels::stack_syrk_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  at::manual_seed(4);
  const auto a = at::randn({7, 256, 256});
  auto together = random_spd_stack(7, 256);
  auto alone = together.clone();
  kernels::stack_syrk(together, a, /*transpose_a=*/false, 0.05, 0.95);
  for (int64_t i = 0; i < 7; ++i)
    kernels::stack_syrk(alone.slice(0, i, i + 1), a.slice(0, i, i + 1), false, 0.05, 0.95);
  EXPECT_TRUE(at::equal(together, alone));
}

TEST(StackBlas, SyrkRefusesWhatItCannotTake) {
  const auto c = at::zeros({2, 4, 4});
  const auto a = at::zeros({2, 4, 6});
  EXPECT_FALSE(kernels::stack_syrk_supported(c.to(at::kHalf), a.to(at::kHalf)));
  EXPECT_FALSE(kernels::stack_syrk_supported(c, a.to(at::kDouble)));
  EXPECT_FALSE(kernels::stack_syrk_supported(c, at::zeros({2, 6, 4}).transpose(1, 2)));  // unit row stride
  EXPECT_FALSE(kernels::stack_syrk_supported(c.transpose(1, 2), a));
  EXPECT_FALSE(kernels::stack_syrk_supported(at::zeros({1, 4, 4}).expand({2, 4, 4}), a));  // overlapping outputs
  EXPECT_FALSE(kernels::stack_syrk_supported(at::zeros({3, 4, 4}), a));
  const auto shared = at::zeros({2, 4, 10});
  EXPECT_FALSE(
      kernels::stack_syrk_supported(shared.narrow(2, 0, 4), shared.narrow(2, 4, 6)));  // C and A in one storage
  try {
    kernels::stack_syrk(c.to(at::kHalf), a.to(at::kHalf), false, 1.0, 1.0);
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_THAT(error.what_without_backtrace(), HasSubstr("stack_syrk cannot take stacks"));
  }
  if (kernels::stack_syrk_supported(c, a)) {
    try {
      kernels::stack_syrk(c, a, /*transpose_a=*/true, 1.0, 1.0);  // AᵀA is 6 × 6
      FAIL() << "no error";
    } catch (const c10::Error& error) {
      EXPECT_THAT(error.what_without_backtrace(), HasSubstr("does not fit"));
    }
  }
}

// S Sᵀ of an EVD root by syrk: the root is exactly symmetric, and as accurate as
// before against float64 (the solver tests hold it to the float32 floor).
TEST(StackBlas, EvdRootsFromSyrkAreExactlySymmetric) {
  const auto plan = kernels::stack_syrk_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  const auto stack = random_spd_stack(6, 64);
  const auto root = inverse_root(stack, 4, dash::testing::solver_options(RootMethod::EVD).epsilon(0.0));
  EXPECT_TRUE(at::equal(root, root.transpose(1, 2)));
  const auto [values, vectors] = at::linalg_eigh(stack.to(at::kDouble));
  const auto reference = at::matmul(vectors * values.pow(-0.25).unsqueeze(1), vectors.transpose(1, 2));
  EXPECT_LT(((root.to(at::kDouble) - reference).norm() / reference.norm()).item<double>(), 1e-5);
}

// A stack's bmm split over the cores gives the product of one call; stacks large
// enough to be split, and small ones that are not.
TEST(StackBlas, BmmOverRangesIsTheProduct) {
  at::manual_seed(5);
  for (int64_t count : {1, 2, 5}) {
    for (int64_t size : {9, 130}) {
      const auto a = at::randn({count, size + 3, size});
      const auto b = at::randn({count, size, size - 2});
      auto out = at::full({count, size + 3, size - 2}, std::numeric_limits<float>::quiet_NaN());
      EXPECT_EQ(&kernels::stack_bmm_out(out, a, b), &out);
      const auto expected = at::bmm(a.to(at::kDouble), b.to(at::kDouble));
      EXPECT_LT((out.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5 * expected.abs().max().item<double>())
          << "count " << count << " size " << size;
    }
  }
  auto wrong = at::zeros({2, 4, 4});
  try {
    kernels::stack_bmm_out(wrong, at::zeros({2, 4, 3}), at::zeros({2, 3, 5}));
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_THAT(error.what_without_backtrace(), HasSubstr("does not fit"));
  }
}

// bfloat16 stacks (oneDNN in LibTorch, split over the cores when ATen's pool has
// one thread, as set here) and a scale: alpha · a @ b within bfloat16's rounding
// of the product, NaN in out not read, and a matrix's product the same whatever
// the stack's size (the split gives each range to one call of the same kernel).
TEST(StackBlas, BFloat16BmmOverRangesIsTheScaledProduct) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  if (kernels::stack_lapack_plan(40, at::Device(at::kCPU)).workers < 2) {
    std::cout << "no split here (" << kernels::stack_lapack_plan(40, at::Device(at::kCPU)).description
              << "): one call each\n";
  }
  at::manual_seed(6);
  for (int64_t count : {1, 3, 40}) {
    for (double alpha : {1.0, -0.375}) {
      const auto a = at::randn({count, 67, 64}).to(at::kBFloat16);
      const auto b = at::randn({count, 64, 70}).to(at::kBFloat16);
      auto out = at::full({count, 67, 70}, std::numeric_limits<float>::quiet_NaN(), a.options());
      kernels::stack_bmm_out(out, a, b, alpha);
      const auto expected = alpha * at::bmm(a.to(at::kDouble), b.to(at::kDouble));
      const auto error = (out.to(at::kDouble) - expected).abs().max().item<double>();
      // One rounding of each product to bfloat16 (u = 2⁻⁸), and float32 sums.
      EXPECT_LE(error, std::ldexp(1.0, -8) * expected.abs().max().item<double>())
          << "count " << count << " alpha " << alpha;
      auto alone = at::empty({1, 67, 70}, a.options());
      kernels::stack_bmm_out(alone, a.narrow(0, count - 1, 1), b.narrow(0, count - 1, 1), alpha);
      EXPECT_TRUE(at::equal(alone[0], out[count - 1])) << "count " << count << " alpha " << alpha;
    }
  }
  at::set_num_threads(threads);
}

// What this machine's LibTorch links (Debian's pthreads OpenBLAS) has syrk; the
// plan names the reason wherever it does not.
TEST(StackBlas, TheSyrkPlanSaysWhy) {
  const auto plan = kernels::stack_syrk_plan(at::Device(at::kCPU));
  EXPECT_THAT(plan.description, HasSubstr(plan.one_triangle ? "syrk on the lower triangle" : "one GEMM per stack ("));
  if (kernels::stack_lapack_plan(16, at::Device(at::kCPU)).workers > 1)
    EXPECT_TRUE(plan.one_triangle) << plan.description;
  EXPECT_FALSE(kernels::stack_syrk_plan(at::Device(at::kCUDA, 0)).one_triangle);
}

// C ← β C + α A B against float64: rectangular stacks, C of more than one block of
// 128 rows (300 = 128 + 128 + 44) and of fewer, β = 0 over NaN, a stack of one;
// the elementwise bound of a dot product of length k (as below).
TEST(StackBlas, GemmMatchesFloat64) {
  if (!kernels::stack_symmetric_product_plan(at::Device(at::kCPU)).one_triangle) GTEST_SKIP() << "no split GEMM here";
  at::manual_seed(10);
  for (auto dtype : {at::kFloat, at::kDouble}) {
    const double u = dtype == at::kFloat ? std::ldexp(1.0, -24) : 2.0 * std::ldexp(1.0, -53);
    for (auto [count, m, k, n] : {std::array<int64_t, 4>{1, 300, 70, 90}, {3, 50, 130, 7}, {2, 128, 128, 128}}) {
      for (double beta : {0.0, 0.5}) {
        const auto a = at::randn({count, m, k}, dtype);
        const auto b = at::randn({count, k, n}, dtype);
        auto c = at::randn({count, m, n}, dtype);
        const auto c_before = beta == 0.0 ? at::zeros({count, m, n}, at::kDouble) : c.to(at::kDouble).clone();
        if (beta == 0.0) c.fill_(std::numeric_limits<double>::quiet_NaN());
        ASSERT_TRUE(kernels::stack_gemm_supported(c, a, b));
        kernels::stack_gemm(c, a, b, -1.5, beta);
        const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
        const auto expected = beta * c_before - 1.5 * at::bmm(a64, b64);
        const auto bound = (static_cast<double>(k) + 2.0) * u *
                           (1.5 * at::bmm(a64.abs(), b64.abs()) + std::abs(beta) * c_before.abs());
        EXPECT_LE(((c.to(at::kDouble) - expected).abs() - bound).max().item<double>(), 0.0)
            << dtype << " " << count << "x" << m << "x" << k << "x" << n << " beta " << beta;
      }
    }
  }
}

// Each (matrix, block of rows) is one single-threaded GEMM: the same bits alone as
// in a stack; and what it refuses, with a message.
TEST(StackBlas, GemmGivesEachMatrixWhatItGetsAloneAndRefusesWhatItCannotTake) {
  if (!kernels::stack_symmetric_product_plan(at::Device(at::kCPU)).one_triangle) GTEST_SKIP() << "no split GEMM here";
  at::manual_seed(11);
  const auto a = at::randn({5, 256, 200});
  const auto b = at::randn({5, 200, 256});
  auto together = at::empty({5, 256, 256});
  auto alone = at::empty({5, 256, 256});
  kernels::stack_gemm(together, a, b, 0.5, 0.0);
  for (int64_t i = 0; i < 5; ++i)
    kernels::stack_gemm(alone.slice(0, i, i + 1), a.slice(0, i, i + 1), b.slice(0, i, i + 1), 0.5, 0.0);
  EXPECT_TRUE(at::equal(together, alone));
  const auto c = at::zeros({2, 4, 6});
  EXPECT_TRUE(kernels::stack_gemm_supported(c, at::zeros({2, 4, 3}), at::zeros({2, 3, 6})));
  EXPECT_FALSE(kernels::stack_gemm_supported(c, at::zeros({2, 4, 3}), at::zeros({2, 4, 6})));  // inner sizes differ
  EXPECT_FALSE(
      kernels::stack_gemm_supported(c, at::zeros({2, 3, 4}).transpose(1, 2), at::zeros({2, 3, 6})));  // column-major A
  EXPECT_FALSE(
      kernels::stack_gemm_supported(c.to(at::kHalf), at::zeros({2, 4, 3}, at::kHalf), at::zeros({2, 3, 6}, at::kHalf)));
  const auto shared = at::zeros({2, 4, 12});
  EXPECT_FALSE(kernels::stack_gemm_supported(
      shared.narrow(2, 0, 6), shared.narrow(2, 6, 6).narrow(1, 0, 4), at::zeros({2, 6, 6})));
  EXPECT_THAT(error_of([&] {
    kernels::stack_gemm(c, at::zeros({2, 4, 3}), at::zeros({2, 4, 6}), 1.0, 0.0);
  }),
      HasSubstr("stack_gemm cannot take stacks"));
}

// (M + Mᵀ)/2: symmetric bit for bit (both entries are the same sum, halved exactly).
at::Tensor exactly_symmetric(const at::Tensor& m) { return (m + m.transpose(1, 2)) * 0.5; }

// A exactly symmetric and B = A/2 (an exact scaling), in float64: the exact
// product A B = A²/2 of the stored numbers is symmetric, as the solvers' products of
// commuting iterates are meant to be, so a mirrored triangle can be held to the
// rounding bound entry by entry.
std::pair<at::Tensor, at::Tensor> commuting_pair(int64_t count, int64_t n, uint64_t seed) {
  const auto a = exactly_symmetric(testing::log_spaced_spectrum(count, n, 1e3, seed).matrices);
  return {a, a * 0.5};
}

// C ← β C + α A B against float64 for sizes of one panel and of several (some
// ragged: n not a multiple of the panel width; at 350 the panels are 48 wide, so
// the mirror's 32-wide tiles do not divide them, and the last is 14 wide), stacks of one and of several,
// β = 0 over a C full of NaN, and operands with row strides wider than their
// rows. Elementwise bound: |fl(A B) − A B| ≤ n·u·|A||B| for a dot product of
// length n (Higham, "Accuracy and Stability", eq. 3.12), plus the β C term.
TEST(StackBlas, SymmetricProductMatchesFloat64AndIsExactlySymmetric) {
  const auto plan = kernels::stack_symmetric_product_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  for (auto dtype : {at::kFloat, at::kDouble}) {
    const double u = dtype == at::kFloat ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
    for (int64_t n : {5, 37, 64, 130, 256, 350}) {
      for (int64_t count : {1, 3}) {
        for (double beta : {0.0, 1.0, -0.5}) {
          const auto [a64, b64] = commuting_pair(count, n, static_cast<uint64_t>(n + count));
          auto a_rows = at::zeros({count, n, n + 3}, dtype);
          const auto a = a_rows.narrow(2, 1, n).copy_(a64);
          const auto b = b64.to(dtype);
          auto c_rows = at::zeros({count, n, n + 5}, dtype);
          auto c = c_rows.narrow(2, 0, n);
          const auto [c64, ignored] = commuting_pair(count, n, 99);
          c.copy_(c64);  // exactly symmetric: β reads C's lower triangle only
          if (beta == 0.0) c.fill_(std::numeric_limits<double>::quiet_NaN());
          const auto c_before = beta == 0.0 ? at::zeros_like(c64) : c.to(at::kDouble).clone();
          const double alpha = 0.7;
          const auto exact_a = a.to(at::kDouble), exact_b = b.to(at::kDouble);
          const auto expected = beta * c_before + alpha * at::bmm(exact_a, exact_b);
          // A float64 reference rounds as much as a float64 result: twice the bound.
          const double references = dtype == at::kDouble ? 2.0 : 1.0;
          const auto bound = references * (static_cast<double>(n) + 2.0) * u *
                             (alpha * at::bmm(exact_a.abs(), exact_b.abs()) + std::abs(beta) * c_before.abs());
          ASSERT_TRUE(kernels::stack_symmetric_product_supported(c, a, b));
          kernels::stack_symmetric_product(c, a, b, alpha, beta);
          const auto excess = ((c.to(at::kDouble) - expected).abs() - bound).max().item<double>();
          EXPECT_LE(excess, 0.0) << dtype << " n " << n << " count " << count << " beta " << beta;
          EXPECT_TRUE(at::equal(c, c.transpose(1, 2))) << dtype << " n " << n << " count " << count;
          // The columns past n in C's rows are not C's: untouched.
          EXPECT_EQ(c_rows.narrow(2, n, 5).abs().sum().item<double>(), 0.0);
        }
      }
    }
  }
}

// Only the lower triangle is computed: for a product that is not symmetric the
// result is that triangle mirrored (what the header promises for misuse).
TEST(StackBlas, SymmetricProductComputesTheLowerTriangle) {
  const auto plan = kernels::stack_symmetric_product_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  at::manual_seed(6);
  const auto a = at::randn({2, 100, 100}, at::kDouble);
  const auto b = at::randn({2, 100, 100}, at::kDouble);
  auto c = at::empty({2, 100, 100}, at::kDouble);
  kernels::stack_symmetric_product(c, a, b, 1.0, 0.0);
  const auto lower = at::bmm(a, b).tril();
  const auto expected = lower + lower.tril(-1).transpose(1, 2);
  EXPECT_LT((c - expected).abs().max().item<double>(), 1e-12);
}

// Every (matrix, panel) is one single-threaded GEMM whichever thread runs it, so a
// matrix gets the same bits alone as in a stack (batched and per-block roots agree).
TEST(StackBlas, SymmetricProductGivesEachMatrixWhatItGetsAlone) {
  const auto plan = kernels::stack_symmetric_product_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  const auto [a64, b64] = commuting_pair(5, 256, 8);
  const auto a = a64.to(at::kFloat), b = b64.to(at::kFloat);
  auto together = at::empty_like(a);
  auto alone = at::empty_like(a);
  kernels::stack_symmetric_product(together, a, b, 2.0, 0.0);
  for (int64_t i = 0; i < 5; ++i) {
    kernels::stack_symmetric_product(alone.slice(0, i, i + 1), a.slice(0, i, i + 1), b.slice(0, i, i + 1), 2.0, 0.0);
  }
  EXPECT_TRUE(at::equal(together, alone));
}

TEST(StackBlas, SymmetricProductRefusesWhatItCannotTake) {
  const auto c = at::zeros({2, 4, 4});
  const auto a = at::zeros({2, 4, 4});
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(c.to(at::kHalf), a.to(at::kHalf), a.to(at::kHalf)));
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(c, a, a.to(at::kDouble)));
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(c, a, at::zeros({2, 4, 5})));  // not square
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(c, a, at::zeros({3, 4, 4})));  // another count
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(c, a, at::zeros({2, 5, 4}).narrow(1, 0, 4).transpose(1, 2)));
  EXPECT_FALSE(
      kernels::stack_symmetric_product_supported(at::zeros({1, 4, 4}).expand({2, 4, 4}), a, a));  // overlapping
  EXPECT_FALSE(kernels::stack_symmetric_product_supported(a, a, c));                              // C is A
  EXPECT_THAT(
      error_of([&] { kernels::stack_symmetric_product(c.to(at::kHalf), a.to(at::kHalf), a.to(at::kHalf), 1.0, 0.0); }),
      HasSubstr("stack_symmetric_product cannot take stacks"));
}

// FLOPs of the panels as run: n²(n + w) when the width w divides n (a GEMM's are 2n³).
TEST(StackBlas, SymmetricProductFlopsCountThePanels) {
  EXPECT_DOUBLE_EQ(kernels::symmetric_product_flops(256), 256.0 * 256.0 * (256.0 + 32.0));
  EXPECT_DOUBLE_EQ(kernels::symmetric_product_flops(1024), 1024.0 * 1024.0 * (1024.0 + 128.0));
  EXPECT_DOUBLE_EQ(kernels::symmetric_product_flops(16), 2.0 * 16.0 * 16.0 * 16.0);  // one panel: a GEMM
  const double ragged = kernels::symmetric_product_flops(130);
  EXPECT_GT(ragged, 130.0 * 130.0 * 131.0);
  EXPECT_LT(ragged, 2.0 * 130.0 * 130.0 * 130.0);
}

// On a CPU with the symmetric product, the matmul solvers' roots come out exactly
// symmetric (every product is one triangle mirrored) and as accurate as the method.
TEST(StackBlas, MatmulSolverRootsAreExactlySymmetric) {
  const auto plan = kernels::stack_symmetric_product_plan(at::Device(at::kCPU));
  if (!plan.one_triangle) GTEST_SKIP() << plan.description;
  const auto spectrum = testing::log_spaced_spectrum(4, 96, 10.0, 12);
  const auto reference = testing::reference_inverse_root(spectrum, 0.0, 4);
  for (auto method : dash::testing::matmul_solvers()) {
    const auto options = dash::testing::solver_options(method)
                             .epsilon(0.0)
                             .newton(NewtonOptions().steps(20))
                             .chebyshev(ChebyshevOptions().degree(40).interval_min(1e-3));
    const auto root = inverse_root(spectrum.matrices.to(at::kFloat), 4, options);
    EXPECT_TRUE(at::equal(root, root.transpose(1, 2))) << to_string(method);
    // Newton: 20 steps reach float32 rounding (measured 4e-7); Chebyshev: its degree-40
    // approximation error on this interval (measured 1.0e-3).
    const double tolerance = method == RootMethod::Chebyshev ? 3e-3 : 1e-5;
    EXPECT_LT(testing::max_relative_error(root, reference), tolerance) << to_string(method);
  }
}

TEST(StackBlas, TheSymmetricProductPlanSaysWhy) {
  const auto plan = kernels::stack_symmetric_product_plan(at::Device(at::kCPU));
  EXPECT_THAT(
      plan.description, HasSubstr(plan.one_triangle ? "column panels of the lower triangle" : "one GEMM per stack ("));
  if (kernels::stack_lapack_plan(16, at::Device(at::kCPU)).workers > 1)
    EXPECT_TRUE(plan.one_triangle) << plan.description;
  EXPECT_FALSE(kernels::stack_symmetric_product_plan(at::Device(at::kCUDA, 0)).one_triangle);
}

// The CPU's 16-bit matmul instructions as dash decodes CPUID, against GCC's own
// decoding of it; and the warning that stack_bmm_out() gives once where they are
// missing (this project's CPU has AVX512-BF16, so it gives none here).
TEST(CpuFeatures, SixteenBitMatmulInstructionsAreTheCpusOwn) {
  EXPECT_FALSE(kernels::cpu_lacks_native_matmul(at::kFloat));
  EXPECT_FALSE(kernels::cpu_lacks_native_matmul(at::kDouble));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  __builtin_cpu_init();
  const bool bfloat16 = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
  EXPECT_EQ(kernels::cpu_lacks_native_matmul(at::kBFloat16), !bfloat16);
  // AMX-FP16 comes with AVX512-FP16 on every CPU that has it; GCC 12 cannot name it.
  EXPECT_EQ(kernels::cpu_lacks_native_matmul(at::kHalf), !__builtin_cpu_supports("avx512fp16"));
  std::cout << "bfloat16 matmul instructions: " << (bfloat16 ? "yes" : "no") << "\n";
#endif
  EXPECT_THAT(kernels::slow_cpu_matmul_warning(at::kBFloat16),
      HasSubstr("bfloat16 matmuls on a CPU without AVX512-BF16 or AMX-BF16 instructions"));
  EXPECT_THAT(kernels::slow_cpu_matmul_warning(at::kHalf), HasSubstr("float16 matmuls on a CPU without AVX512-FP16"));
  EXPECT_THAT(kernels::slow_cpu_matmul_warning(at::kHalf), HasSubstr("--precisions fp32,fp16"));
}

}  // namespace
}  // namespace dash::kernels
