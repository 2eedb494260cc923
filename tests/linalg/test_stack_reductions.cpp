// Per-matrix reductions and selections of a stack (src/linalg/stack_reductions.h,
// stack_select.h). On a CPU they run loops of their own; each is checked here,
// bit for bit, against the ATen expression it stands for, on stacks with NaN, ±Inf,
// asymmetry either side of the tolerance, negative diagonals, sizes that are not
// multiples of the loops' tiles, rows with gaps between them, float32 and float64.

#include "linalg/scratch.h"
#include "linalg/stack_reductions.h"
#include "linalg/stack_select.h"
#include "support/error_message.h"

#include <ATen/ATen.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace dash::linalg {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

constexpr double kTolerance = 3.4526698e-4;  // the documented √(float32 ε)
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Bitwise equality that counts NaN equal to NaN.
bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         (at::eq(a, b) | (at::isnan(a) & at::isnan(b))).all().item<bool>();
}

// A stack of `count` symmetric matrices of size b whose i-th matrix is damaged in
// the i-th way below (modulo their number), in `dtype`.
at::Tensor awkward_stack(int64_t count, int64_t b, at::ScalarType dtype) {
  at::manual_seed(static_cast<uint64_t>(b));
  auto g = at::randn({count, b, b + 3}, at::kDouble);
  auto stack = at::bmm(g, g.transpose(1, 2)).div_(static_cast<double>(b));
  for (int64_t i = 0; i < count; ++i) {
    auto m = stack[i];
    const double magnitude = m.abs().max().item<double>();
    const int64_t r = b - 1, c = b / 3;  // an entry below the diagonal (b ≥ 2)
    switch (i % 9) {
      case 1:
        m[r][c] = kNaN;
        break;
      case 2:
        m[c][r] = kInf;
        break;
      case 3:
        m[r][r] = -kInf;
        break;
      case 4:  // asymmetric well within the tolerance
        m[r][c] = m[c][r].item<double>() + 0.25 * kTolerance * magnitude;
        break;
      case 5:  // asymmetric beyond it
        m[r][c] = m[c][r].item<double>() + 4.0 * kTolerance * magnitude;
        break;
      case 6:  // a diagonal entry below −tolerance · magnitude (indefinite)
        m[c][c] = -0.5 * magnitude;
        break;
      case 7:  // a diagonal entry just below zero, within the tolerance
        m[c][c] = -0.25 * kTolerance * magnitude;
        break;
      case 8:
        m.zero_();
        break;
      default:
        break;
    }
  }
  return stack.to(dtype);
}

// max |a_ij| per matrix, NaN for a matrix with a NaN.
at::Tensor reference_magnitude(const at::Tensor& stack) {
  auto magnitude = stack.abs().amax({1, 2}, true);
  return at::where(at::isnan(stack).any(2, true).any(1, true), at::full_like(magnitude, kNaN), magnitude);
}

// What admit_matrices() stands for, in ATen expressions.
AdmittedMatrices reference_admission(const at::Tensor& stack, bool positive_diagonal, double shift) {
  auto magnitude = reference_magnitude(stack);
  auto asymmetry = (stack - stack.transpose(1, 2)).abs().amax({1, 2}, true);
  auto admissible = at::isfinite(magnitude) & (asymmetry <= magnitude * kTolerance);
  if (positive_diagonal) {
    admissible = admissible & (stack.diagonal(0, 1, 2).amin(1, true).unsqueeze(-1) >= magnitude * -kTolerance);
  }
  auto matrices = at::where(admissible, stack, at::eye(stack.size(-1), stack.options()));
  if (shift != 0.0) matrices.diagonal(0, 1, 2).add_(shift);
  return {matrices, admissible, matrices.abs().amax({1, 2}, true)};
}

TEST(StackReductions, LargestMagnitudeIsTheLargestAbsoluteEntryAndNaNForANaN) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int64_t b : {1, 5, 32, 70}) {
      auto stack = awkward_stack(18, b, dtype);
      EXPECT_TRUE(same(largest_magnitude(stack), reference_magnitude(stack))) << dtype << " b = " << b;
      EXPECT_TRUE(same(finite_matrices(stack), at::isfinite(stack).all(2, true).all(1, true))) << dtype << " b = " << b;
    }
  }
  // Rows with a gap between them: the left half of a wider stack, not square.
  auto left = awkward_stack(9, 40, at::kFloat).narrow(2, 0, 20);
  EXPECT_TRUE(same(largest_magnitude(left), reference_magnitude(left)));
}

TEST(StackReductions, AdmissionMatchesItsAtenExpressionBitForBit) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int64_t b : {2, 31, 32, 33, 70}) {
      // 27 matrices, and for b = 70 enough (2.4 M entries) for the loops to split the stack over the cores.
      const auto stack = awkward_stack(b == 70 ? 500 : 27, b, dtype);
      for (bool positive_diagonal : {false, true}) {
        for (double shift : {0.0, 1e-10, 0.5}) {
          Scratch scratch;
          const auto got = admit_matrices(stack, positive_diagonal, shift, scratch);
          const auto expected = reference_admission(stack, positive_diagonal, shift);
          const auto where = c10::str(dtype, " b = ", b, " positive diagonal ", positive_diagonal, " shift ", shift);
          EXPECT_TRUE(same(got.admissible, expected.admissible)) << where;
          EXPECT_TRUE(same(got.matrices, expected.matrices)) << where;
          EXPECT_TRUE(same(got.magnitude, expected.magnitude)) << where;
        }
      }
    }
  }
}

// The damaged matrices are the ones rejected, and nothing else: the reference above
// could share a mistake with the loops, a list of verdicts cannot.
TEST(StackReductions, AdmissionRejectsExactlyTheDamagedMatrices) {
  Scratch scratch;
  const auto stack = awkward_stack(9, 40, at::kFloat);
  const std::vector<bool> psd{true, false, false, false, true, false, false, true, true};
  const std::vector<bool> any{true, false, false, false, true, false, true, true, true};
  for (bool positive_diagonal : {true, false}) {
    const auto admissible = admit_matrices(stack, positive_diagonal, 0.0, scratch).admissible;
    const auto& expected = positive_diagonal ? psd : any;
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(admissible[i].item<bool>(), expected[static_cast<size_t>(i)]) << i << " " << positive_diagonal;
    }
  }
}

TEST(StackReductions, AdmissionReadsRowsWithGapsAndRefusesNonSquareStacks) {
  Scratch scratch;
  auto wide = at::zeros({9, 40, 80}, at::kFloat);
  auto view = wide.narrow(2, 0, 40);
  view.copy_(awkward_stack(9, 40, at::kFloat));
  const auto got = admit_matrices(view, true, 1e-3, scratch);
  const auto expected = reference_admission(view.contiguous(), true, 1e-3);
  EXPECT_TRUE(same(got.admissible, expected.admissible));
  EXPECT_TRUE(same(got.matrices, expected.matrices));
  EXPECT_THAT(error_of([&] { admit_matrices(at::zeros({2, 3, 4}), true, 0.0, scratch); }), HasSubstr("(N, b, b)"));
}

TEST(StackSelect, CopiesAndFillsOnlyTheChosenMatrices) {
  at::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kDouble, at::kBool}) {
    auto random = [&] { return dtype == at::kBool ? at::randn({7, 9, 9}).gt(0.0) : at::randn({7, 9, 9}, dtype); };
    const auto source = random();
    const auto target = random();
    const auto mask = at::tensor(std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1}, at::kByte).to(at::kBool);
    auto copied = target.clone();
    copy_matrices_where(copied, mask, source);
    EXPECT_TRUE(at::equal(copied, at::where(mask.view({-1, 1, 1}), source, target))) << dtype;
    // A destination whose matrices are not one block each (a transposed view) too.
    auto transposed = target.clone().transpose(1, 2);
    copy_matrices_where(transposed, mask, source);
    EXPECT_TRUE(at::equal(transposed, at::where(mask.view({-1, 1, 1}), source, target.transpose(1, 2)))) << dtype;
    if (dtype == at::kBool) continue;
    auto filled = target.clone();
    fill_matrices_where(filled, mask, kNaN);
    EXPECT_TRUE(same(filled, target.masked_fill(mask.view({-1, 1, 1}), kNaN))) << dtype;
  }
}

TEST(StackSelect, RefusesMasksThatDoNotFitTheStack) {
  auto stack = at::zeros({3, 2, 2});
  EXPECT_THAT(error_of([&] { copy_matrices_where(stack, at::ones({2}, at::kBool), stack.clone()); }),
      HasSubstr("(N,) bool mask"));
  EXPECT_THAT(error_of([&] { fill_matrices_where(stack, at::ones({3}), 0.0); }), HasSubstr("(N,) bool mask"));
  EXPECT_THAT(error_of([&] { copy_matrices_where(stack, at::ones({3}, at::kBool), at::zeros({3, 2, 3})); }),
      HasSubstr("a source like the destination"));
}

}  // namespace
}  // namespace dash::linalg
