// Per-matrix reductions and selections of a stack (src/kernels/stack_reductions.h,
// stack_select.h). On a CPU they run loops of their own; each is checked here,
// bit for bit, against the ATen expression it stands for, on stacks with NaN, ±Inf,
// asymmetry either side of the tolerance, negative diagonals, sizes that are not
// multiples of the loops' tiles, rows with gaps between them, float32 and float64.

#include "kernels/scratch.h"
#include "kernels/stack_reductions.h"
#include "kernels/stack_select.h"
#include "support/error_message.h"

#include <ATen/ATen.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dash::kernels {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

constexpr double kTolerance = 3.4526698e-4;  // the documented √(float32 ε)
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Bit for bit (+0 and −0 apart), any NaN equal to any NaN.
bool same(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.scalar_type() == at::kBool) return at::equal(a, b);
  const auto nan = at::isnan(a);
  if (!at::equal(nan, at::isnan(b))) return false;
  const auto bits = a.scalar_type() == at::kDouble ? at::kLong : at::kInt;
  return at::equal(a.masked_fill(nan, 0.0).contiguous().view(bits), b.masked_fill(nan, 0.0).contiguous().view(bits));
}

// A stack of `count` symmetric matrices of size b whose i-th matrix is damaged in
// the i-th way below (modulo their number), in `dtype`.
at::Tensor awkward_stack(int64_t count, int64_t b, at::ScalarType dtype) {
  at::manual_seed(static_cast<uint64_t>(b));
  auto g = at::randn({count, b, b + 3}, at::kDouble);
  auto stack = at::bmm(g, g.transpose(1, 2)).div_(static_cast<double>(b));
  const auto magnitudes = stack.abs().amax({1, 2});
  auto a = stack.accessor<double, 3>();
  const int64_t r = b - 1, c = b / 3;  // an entry below the diagonal (b ≥ 2)
  for (int64_t i = 0; i < count; ++i) {
    const double magnitude = magnitudes[i].item<double>();
    switch (i % 9) {
      case 1:
        a[i][r][c] = kNaN;
        break;
      case 2:
        a[i][c][r] = kInf;
        break;
      case 3:
        a[i][r][r] = -kInf;
        break;
      case 4:  // asymmetric well within the tolerance
        a[i][r][c] = a[i][c][r] + 0.25 * kTolerance * magnitude;
        break;
      case 5:  // asymmetric beyond it
        a[i][r][c] = a[i][c][r] + 4.0 * kTolerance * magnitude;
        break;
      case 6:  // a diagonal entry below −tolerance · magnitude (indefinite)
        a[i][c][c] = -0.5 * magnitude;
        break;
      case 7:  // a diagonal entry just below zero, within the tolerance
        a[i][c][c] = -0.25 * kTolerance * magnitude;
        break;
      case 8:
        stack[i].zero_();
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
kernels::AdmittedMatrices reference_admission(const at::Tensor& stack, bool positive_diagonal, double shift) {
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
      EXPECT_TRUE(same(kernels::largest_magnitude(stack), reference_magnitude(stack))) << dtype << " b = " << b;
      EXPECT_TRUE(same(kernels::finite_matrices(stack), at::isfinite(stack).all(2, true).all(1, true)))
          << dtype << " b = " << b;
    }
  }
  // Rows with a gap between them: the left half of a wider stack, not square.
  auto left = awkward_stack(9, 40, at::kFloat).narrow(2, 0, 20);
  EXPECT_TRUE(same(kernels::largest_magnitude(left), reference_magnitude(left)));
  // Large enough (2.4 M entries) to be split over the cores.
  auto large = awkward_stack(540, 64, at::kFloat);
  EXPECT_TRUE(same(kernels::largest_magnitude(large), reference_magnitude(large)));
}

// The step's gradient check: one float32 maximum over tensors of every kind (the
// CPU loops' float32 and float64 stacks, views with gaps, bfloat16 and 4-d tensors
// through the ∞-norm), against max |x| in float64; into a buffer the caller keeps.
TEST(StackReductions, LargestMagnitudeOfAListIsTheLargestOverAllOfThem) {
  const auto f = at::TensorOptions().dtype(at::kFloat);
  std::vector<at::Tensor> tensors = {at::randn({5, 7}, f), at::randn({3, 4, 6}, f).mul_(3),
      at::randn({9, 8}, f.dtype(at::kDouble)).narrow(1, 2, 5), at::randn({40}, f.dtype(at::kBFloat16)).mul_(2),
      at::randn({2, 3, 4, 5}, f).transpose(1, 3), at::randn({2, 3, 4, 5}, f.dtype(at::kDouble)).transpose(1, 3),
      at::empty({0, 3}, f)};
  double expected = 0.0;
  for (const auto& t : tensors) {
    if (t.numel() > 0) expected = std::max(expected, t.to(at::kDouble).abs().max().item<double>());
  }
  at::Tensor buffer;
  const auto first = largest_magnitude_of_list(tensors, buffer);
  EXPECT_EQ(first.dim(), 0);
  EXPECT_EQ(first.scalar_type(), at::kFloat);
  EXPECT_EQ(first.item<float>(), static_cast<float>(expected));
  // Kept: the second call writes into the same memory.
  const auto* memory = buffer.data_ptr();
  tensors[3].mul_(10);  // the bfloat16 tensor now holds the largest entry
  const auto second = largest_magnitude_of_list(tensors, buffer);
  EXPECT_EQ(buffer.data_ptr(), memory);
  EXPECT_EQ(second.item<float>(), tensors[3].to(at::kDouble).abs().max().item<float>());

  // Beyond float32's range: Inf, as a conversion gives; NaN anywhere: NaN; none: 0.
  EXPECT_TRUE(
      std::isinf(largest_magnitude_of_list({at::full({2, 2}, 1e39, f.dtype(at::kDouble))}, buffer).item<float>()));
  const auto far = at::full({2, 2, 2, 2}, 1e39, f.dtype(at::kDouble)).transpose(1, 3);  // the ∞-norm's path
  EXPECT_TRUE(std::isinf(largest_magnitude_of_list({at::randn({3}, f), far}, buffer).item<float>()));
  auto with_nan = at::randn({4, 4}, f.dtype(at::kBFloat16));
  with_nan[2][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(largest_magnitude_of_list({at::randn({3, 3}, f), with_nan}, buffer).item<float>()));
  EXPECT_EQ(largest_magnitude_of_list({}, buffer).item<float>(), 0.0f);
  EXPECT_EQ(largest_magnitude_of_list({at::empty({0}, f)}, buffer).item<float>(), 0.0f);
}

// A stack whose rows are not contiguous (a transposed view) takes the ATen
// expressions, on a CPU too: the path GPUs take, against the loops, bit for bit.
TEST(StackReductions, AtenPathAndCpuLoopsAgreeBitForBit) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    const auto stack = awkward_stack(27, 33, dtype);
    const auto transposed_view = stack.transpose(1, 2).contiguous().transpose(1, 2);  // same values, stride(2) = b
    ASSERT_NE(transposed_view.stride(2), 1);
    EXPECT_TRUE(same(kernels::largest_magnitude(transposed_view), kernels::largest_magnitude(stack))) << dtype;
    for (bool positive_diagonal : {false, true}) {
      for (double shift : {0.0, 1e-10}) {
        kernels::Scratch scratch;
        const auto aten = kernels::admit_matrices(transposed_view, positive_diagonal, shift, scratch);
        const auto loops = kernels::admit_matrices(stack, positive_diagonal, shift, scratch);
        EXPECT_TRUE(same(aten.admissible, loops.admissible)) << dtype;
        EXPECT_TRUE(same(aten.matrices, loops.matrices)) << dtype;
        EXPECT_TRUE(same(aten.magnitude, loops.magnitude)) << dtype;
      }
    }
  }
}

// An asymmetry of exactly the bound fl(max |a| · fl(√ε)) is admitted, the next
// number above it is not: the bound is rounded as ATen rounds it, in the stack's dtype.
TEST(StackReductions, AsymmetryAtTheBoundIsAdmittedAndAboveItIsNot) {
  auto at_bound = [](at::ScalarType dtype, bool above) {
    auto m = at::eye(40, dtype).mul_(3.0);  // max |a| = 3
    const double bound =
        dtype == at::kFloat ? static_cast<double>(3.0f * static_cast<float>(kTolerance)) : 3.0 * kTolerance;
    const double entry = !above                ? bound
                         : dtype == at::kFloat ? static_cast<double>(std::nextafter(static_cast<float>(bound), 1.0f))
                                               : std::nextafter(bound, 1.0);
    m[37][5] = entry;  // m[5][37] = 0: the asymmetry is the entry itself, exactly
    kernels::Scratch scratch;
    return kernels::admit_matrices(m.unsqueeze(0), true, 0.0, scratch).admissible.item<bool>();
  };
  for (auto dtype : {at::kFloat, at::kDouble}) {
    EXPECT_TRUE(at_bound(dtype, false)) << dtype;
    EXPECT_FALSE(at_bound(dtype, true)) << dtype;
  }
}

TEST(StackReductions, AdmissionMatchesItsAtenExpressionBitForBit) {
  auto check = [](const at::Tensor& stack, bool positive_diagonal, double shift) {
    kernels::Scratch scratch;
    const auto got = kernels::admit_matrices(stack, positive_diagonal, shift, scratch);
    const auto expected = reference_admission(stack, positive_diagonal, shift);
    const auto where =
        c10::str(stack.scalar_type(), " ", stack.sizes(), " positive diagonal ", positive_diagonal, " shift ", shift);
    EXPECT_TRUE(same(got.admissible, expected.admissible)) << where;
    EXPECT_TRUE(same(got.matrices, expected.matrices)) << where;
    EXPECT_TRUE(same(got.magnitude, expected.magnitude)) << where;
  };
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int64_t b : {2, 31, 32, 33, 70}) {
      const auto stack = awkward_stack(27, b, dtype);
      for (bool positive_diagonal : {false, true}) {
        for (double shift : {0.0, 1e-10, 0.5}) check(stack, positive_diagonal, shift);
      }
    }
  }
  // Enough matrices (2.4 M entries) for the loops to split the stack over the cores.
  check(awkward_stack(500, 70, at::kFloat), true, 1e-10);
}

// The damaged matrices are the ones rejected, and nothing else: the reference above
// could share a mistake with the loops, a list of verdicts cannot.
TEST(StackReductions, AdmissionRejectsExactlyTheDamagedMatrices) {
  kernels::Scratch scratch;
  const auto stack = awkward_stack(9, 40, at::kFloat);
  const std::vector<bool> psd{true, false, false, false, true, false, false, true, true};
  const std::vector<bool> any{true, false, false, false, true, false, true, true, true};
  for (bool positive_diagonal : {true, false}) {
    const auto admissible = kernels::admit_matrices(stack, positive_diagonal, 0.0, scratch).admissible;
    const auto& expected = positive_diagonal ? psd : any;
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(admissible[i].item<bool>(), expected[static_cast<size_t>(i)]) << i << " " << positive_diagonal;
    }
  }
}

TEST(StackReductions, AdmissionReadsRowsWithGapsAndRefusesNonSquareStacks) {
  kernels::Scratch scratch;
  auto wide = at::zeros({9, 40, 80}, at::kFloat);
  auto view = wide.narrow(2, 0, 40);
  view.copy_(awkward_stack(9, 40, at::kFloat));
  const auto got = kernels::admit_matrices(view, true, 1e-3, scratch);
  const auto expected = reference_admission(view.contiguous(), true, 1e-3);
  EXPECT_TRUE(same(got.admissible, expected.admissible));
  EXPECT_TRUE(same(got.matrices, expected.matrices));
  EXPECT_THAT(error_of([&] {
    kernels::admit_matrices(at::zeros({2, 3, 4}), true, 0.0, scratch);
  }),
      HasSubstr("(N, b, b)"));
}

TEST(StackSelect, CopiesAndFillsOnlyTheChosenMatrices) {
  at::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kDouble, at::kBool}) {
    auto random = [&] { return dtype == at::kBool ? at::randn({7, 9, 9}).gt(0.0) : at::randn({7, 9, 9}, dtype); };
    const auto source = random();
    const auto target = random();
    const auto mask = at::tensor(std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1}, at::kByte).to(at::kBool);
    auto copied = target.clone();
    kernels::copy_matrices_where(copied, mask, source);
    EXPECT_TRUE(at::equal(copied, at::where(mask.view({-1, 1, 1}), source, target))) << dtype;
    // A destination whose matrices are not one block each (a transposed view) too.
    auto transposed = target.clone().transpose(1, 2);
    kernels::copy_matrices_where(transposed, mask, source);
    EXPECT_TRUE(at::equal(transposed, at::where(mask.view({-1, 1, 1}), source, target.transpose(1, 2)))) << dtype;
    if (dtype == at::kBool) continue;
    auto filled = target.clone();
    kernels::fill_matrices_where(filled, mask, kNaN);
    EXPECT_TRUE(same(filled, target.masked_fill(mask.view({-1, 1, 1}), kNaN))) << dtype;
  }
}

TEST(StackSelect, RefusesMasksThatDoNotFitTheStack) {
  auto stack = at::zeros({3, 2, 2});
  EXPECT_THAT(error_of([&] { kernels::copy_matrices_where(stack, at::ones({2}, at::kBool), stack.clone()); }),
      HasSubstr("(N,) bool mask"));
  EXPECT_THAT(error_of([&] { kernels::fill_matrices_where(stack, at::ones({3}), 0.0); }), HasSubstr("(N,) bool mask"));
  EXPECT_THAT(error_of([&] {
    kernels::copy_matrices_where(stack, at::ones({3}, at::kBool), at::zeros({3, 2, 3}));
  }),
      HasSubstr("a source like the destination"));
  // A destination whose matrices share memory is ATen's to refuse, not written twice over.
  auto expanded = at::zeros({1, 2, 2}).expand({3, 2, 2});
  EXPECT_THROW(kernels::copy_matrices_where(expanded, at::ones({3}, at::kBool), at::ones({3, 2, 2})), c10::Error);
}

}  // namespace
}  // namespace dash::kernels
