// NewtonDBEvaluation::Eigh: NewtonDB's root evaluated as a function of the
// eigenvalues must be the root the matrix iteration computes (the reference here,
// run in float64 where its own rounding is negligible), including where ten steps
// leave it far from the exact inverse root. Frobenius scaling makes the two scales
// identical (‖A‖_F is exact in both); power iteration only estimates λ_max, so
// that case uses spectra whose top eigenvalue it resolves.

#include <dash/inverse_root.h>
#include <dash/option_names.h>

#include "support/solver_options.h"
#include "support/spd_matrices.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>

namespace dash {
namespace {

using testing::float32_floor;
using testing::log_spaced_spectrum;
using testing::max_relative_error;
using testing::reference_inverse_root;

InverseRootOptions newton_db(NewtonDBEvaluation evaluation, Scaling scaling = Scaling::Frobenius) {
  return InverseRootOptions()
      .method(RootMethod::NewtonDB)
      .epsilon(0.0)
      .scaling(SpectralScaleOptions().method(scaling))
      .newton_db(NewtonDBOptions().evaluation(evaluation));
}

InverseRootOptions by_eigh(const InverseRootOptions& options) {
  return testing::with_evaluation(options, NewtonDBEvaluation::Eigh);
}

// Rounding of the float64 matrix iteration over ~20 products, amplified by the
// growth of the under-resolved directions (×1.5 a step): far below 1e-8.
constexpr double kSameFunction = 1e-8;

TEST(NewtonDBByEigh, IsTheMatrixIterationsRootForEveryPolynomialAndRoot) {
  const int64_t b = 48;
  for (double condition : {1e2, 1e6, 1e10}) {
    const auto spectrum = log_spaced_spectrum(3, b, condition, /*seed=*/11);
    for (auto polynomial :
        {NewtonDBPolynomial::NewtonSchulz, NewtonDBPolynomial::Minimax3, NewtonDBPolynomial::Minimax5}) {
      for (int64_t p : {1, 2, 4, 8}) {
        auto matmuls = newton_db(NewtonDBEvaluation::Matmuls);
        matmuls.newton_db().polynomial(polynomial);
        const auto reference = inverse_root(spectrum.matrices, p, matmuls);
        const auto eigen = inverse_root(spectrum.matrices, p, by_eigh(matmuls));
        EXPECT_LE(max_relative_error(eigen, reference), kSameFunction)
            << to_string(polynomial) << ", κ = " << condition << ", p = " << p;
      }
    }
  }
}

// NewtonDBEvaluation::Auto, the default: eigh where matrices are on a CPU and the
// matmuls would be float32 ones, the matmul iteration on other devices and in the
// 16-bit precisions (which ask for 16-bit matmuls).
TEST(NewtonDBEvaluationAuto, IsEighOnACpuInFloat32AndMatmulsElsewhere) {
  EXPECT_EQ(NewtonDBOptions().evaluation(), NewtonDBEvaluation::Auto);
  const at::Device cpu(at::kCPU);
  const at::Device cuda(at::kCUDA, 0);  // a device name only: nothing runs on it
  auto options = InverseRootOptions().method(RootMethod::NewtonDB);
  EXPECT_EQ(resolve_newton_db_evaluation(options, cpu), NewtonDBEvaluation::Eigh);
  EXPECT_EQ(resolve_newton_db_evaluation(options, cuda), NewtonDBEvaluation::Matmuls);
  for (auto precision : {MatmulPrecision::BF16, MatmulPrecision::FP16}) {
    EXPECT_EQ(resolve_newton_db_evaluation(InverseRootOptions(options).precision(precision), cpu),
        NewtonDBEvaluation::Matmuls);
  }
  // A set evaluation is kept, on every device and in every precision.
  for (auto set : {NewtonDBEvaluation::Matmuls, NewtonDBEvaluation::Eigh}) {
    for (const auto& device : {cpu, cuda}) {
      for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16}) {
        const auto fixed = testing::with_evaluation(InverseRootOptions(options).precision(precision), set);
        EXPECT_EQ(resolve_newton_db_evaluation(fixed, device), set);
      }
    }
  }
}

TEST(NewtonDBEvaluationAuto, ComputesTheRootsOfWhatItResolvesTo) {
  const auto matrices = log_spaced_spectrum(3, 32, 1e3, /*seed=*/5).matrices.to(at::kFloat);
  for (auto precision : {MatmulPrecision::FP32, MatmulPrecision::BF16}) {
    auto options = InverseRootOptions().method(RootMethod::NewtonDB).epsilon(1e-6).precision(precision);
    auto with = [&](NewtonDBEvaluation evaluation) {
      return inverse_root(matrices, 4, testing::with_evaluation(options, evaluation));
    };
    const auto matmuls = with(NewtonDBEvaluation::Matmuls);
    const auto eigh = with(NewtonDBEvaluation::Eigh);
    ASSERT_FALSE(at::equal(matmuls, eigh));
    EXPECT_TRUE(at::equal(inverse_root(matrices, 4, options), precision == MatmulPrecision::FP32 ? eigh : matmuls))
        << to_string(precision);
  }
}

// The point of the option: ten Newton–Schulz steps are not the exact root at
// κ = 1e10 (the small eigenvalues are under-resolved), and the eigenvalue
// evaluation reproduces that, not the exact root an EVD would give.
TEST(NewtonDBByEigh, KeepsTheUnderResolutionOfTenSteps) {
  const auto spectrum = log_spaced_spectrum(2, 48, 1e10, /*seed=*/5);
  const auto eigen = inverse_root(spectrum.matrices, 4, newton_db(NewtonDBEvaluation::Eigh));
  EXPECT_GT(max_relative_error(eigen, reference_inverse_root(spectrum, 0.0, 4)), 0.1);
  // With enough steps it converges to the exact root, within float64 eigh's floor
  // at this condition (κ·u·√b/p ≈ 4e-6).
  auto converged = newton_db(NewtonDBEvaluation::Eigh).newton(NewtonOptions().steps(60));
  EXPECT_LE(max_relative_error(inverse_root(spectrum.matrices, 4, converged), reference_inverse_root(spectrum, 0.0, 4)),
      1e-5);
}

TEST(NewtonDBByEigh, StopsAtTheToleranceWhereTheMatrixIterationStops) {
  const auto spectrum = log_spaced_spectrum(3, 32, 1e3, /*seed=*/2);
  auto matmuls =
      newton_db(NewtonDBEvaluation::Matmuls).newton(NewtonOptions().steps(40).tolerance(1e-3).check_interval(2));
  const auto reference = inverse_root(spectrum.matrices, 4, matmuls);
  EXPECT_LE(max_relative_error(inverse_root(spectrum.matrices, 4, by_eigh(matmuls)), reference), kSameFunction);
  // The tolerance did stop it early: 40 full steps give another root.
  auto full = by_eigh(matmuls);
  full.newton().tolerance(0.0);
  EXPECT_GT(max_relative_error(inverse_root(spectrum.matrices, 4, full), reference), 1e-7);
}

TEST(NewtonDBByEigh, AppliesTheRelativeRegularisationAsTheMatrixIteration) {
  const auto spectrum = log_spaced_spectrum(3, 32, 1e8, /*seed=*/4);
  for (double epsilon : {0.0, 1e-9}) {
    auto matmuls = newton_db(NewtonDBEvaluation::Matmuls).epsilon(epsilon).relative_epsilon(1e-4);
    EXPECT_LE(max_relative_error(
                  inverse_root(spectrum.matrices, 4, by_eigh(matmuls)), inverse_root(spectrum.matrices, 4, matmuls)),
        kSameFunction)
        << "ε = " << epsilon;
  }
}

// Power iteration converges to λ_max when the top eigenvalue stands apart; then
// margin·λ_max is the same scale in both evaluations.
TEST(NewtonDBByEigh, TakesPowerIterationsScaleFromTheTopEigenvalue) {
  auto values = at::logspace(-1, -7, 40, 10.0, at::kDouble).unsqueeze(0).repeat({2, 1});
  values.select(1, 0).fill_(1.0);
  const auto spectrum = testing::with_eigenvalues(values, /*seed=*/9);
  for (auto scaling : {Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    auto matmuls = newton_db(NewtonDBEvaluation::Matmuls, scaling).epsilon(1e-9);
    matmuls.scaling().iterations(30);
    EXPECT_LE(max_relative_error(
                  inverse_root(spectrum.matrices, 4, by_eigh(matmuls)), inverse_root(spectrum.matrices, 4, matmuls)),
        1e-6)
        << to_string(scaling);
  }
}

// In float32 the eigenvalue evaluation is as accurate as float32 EVD: the float64
// matrix iteration is the reference, within the float32 floor of the condition.
TEST(NewtonDBByEigh, Float32IsWithinTheFloat32Floor) {
  const int64_t b = 64;
  const double condition = 1e4;
  const auto spectrum = log_spaced_spectrum(4, b, condition, /*seed=*/8);
  const auto options = newton_db(NewtonDBEvaluation::Matmuls).newton(NewtonOptions().steps(14));
  const auto reference = inverse_root(spectrum.matrices, 4, options);
  const auto single = inverse_root(spectrum.matrices.to(at::kFloat), 4, by_eigh(options));
  EXPECT_EQ(single.scalar_type(), at::kFloat);
  EXPECT_LE(max_relative_error(single, reference), float32_floor(condition, b, 4) + 1e-5);
}

// A positive semi-definite factor of low rank at ε = 0: eigh returns its zero
// eigenvalues as ±rounding, which the scalar iteration takes as the matrix one
// does (to the capped value of an unresolved direction): the same finite root.
// An all-zero block keeps the caller's scale, as in the matrix iteration.
TEST(NewtonDBByEigh, LowRankAndZeroFactorsGiveTheSameFiniteRoot) {
  auto generator = at::detail::createCPUGenerator(6);
  const auto g = at::randn({2, 32, 3}, generator, at::kDouble);
  auto factors = at::cat({at::bmm(g, g.transpose(1, 2)), at::zeros({1, 32, 32}, at::kDouble)});
  for (auto dtype : {at::kDouble, at::kFloat}) {
    const auto input = factors.to(dtype);
    const auto matmuls = newton_db(NewtonDBEvaluation::Matmuls);
    const auto eigen = inverse_root(input, 4, by_eigh(matmuls));
    EXPECT_TRUE(at::isfinite(eigen).all().item<bool>()) << dtype;
    // In float32 the zero eigenvalues are ±1e-7 of the top: not quite in the capped
    // range of ten steps, so the two roundings (eigh's, the products') move φ a little.
    EXPECT_LE(max_relative_error(eigen, inverse_root(input, 4, matmuls)), dtype == at::kDouble ? 1e-6 : 1e-2) << dtype;
  }
}

// In 16-bit modes the matrix iteration regularises the normalised spectrum at half
// a 16-bit rounding (NewtonDB's 16-bit floor); the eigenvalue evaluation does the
// same, so at κ = 1e6 it stays near the bf16 matrix iteration (within its bf16
// rounding) and far from the unregularised float32 root.
TEST(NewtonDBByEigh, SixteenBitModesKeepNewtonDBsFloor) {
  const auto spectrum = log_spaced_spectrum(3, 32, 1e6, /*seed=*/3);
  const auto input = spectrum.matrices.to(at::kFloat);
  auto bf16 = newton_db(NewtonDBEvaluation::Matmuls);
  bf16.precision(MatmulPrecision::BF16);
  const auto matmuls = inverse_root(input, 4, bf16);
  const double error = max_relative_error(inverse_root(input, 4, by_eigh(bf16)), matmuls);
  const double without_floor =
      max_relative_error(inverse_root(input, 4, by_eigh(newton_db(NewtonDBEvaluation::Matmuls))), matmuls);
  std::cout << "bf16 by eigh vs bf16 matmuls " << error << ", fp32 by eigh vs bf16 matmuls " << without_floor << "\n";
  EXPECT_LE(error, 0.1);  // measured 0.04: bf16 products, κ·u₁₆ amplified
  EXPECT_GT(without_floor, 10 * error);
}

}  // namespace
}  // namespace dash
