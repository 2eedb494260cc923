// Moving block regions between parameters and stacks (src/kernels/matrix_transfer.h).
// Each transfer is checked bit for bit against the ATen op it stands for, pair by
// pair, on block regions with gaps between their rows, ragged edges, vectors and
// scalars, float32 and float64, and lists large enough to be split over the cores;
// and the pairs the loop cannot take (other dtypes, strided rows, broadcasting,
// lazy negation, aliasing, overlapping destinations) are checked to go to ATen,
// with its errors.

#include "kernels/matrix_transfer.h"
#include "support/error_message.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

namespace dash::kernels {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const auto bits = a.scalar_type() == at::kDouble ? at::kLong : at::kInt;
  return at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

// The (grid_rows, grid_cols, rows, cols) view of a block grid whose top-left
// element is (row, col) in `matrix`, as a parameter's block region.
at::Tensor grid_of_blocks(const at::Tensor& matrix, int64_t row, int64_t col, int64_t grid_rows, int64_t grid_cols,
    int64_t rows, int64_t cols) {
  return matrix.narrow(0, row, grid_rows * rows)
      .narrow(1, col, grid_cols * cols)
      .view({grid_rows, rows, grid_cols, cols})
      .permute({0, 2, 1, 3});
}

// A parameter-like matrix and a stack, and pairs between their regions: a full
// grid of 64 × 48 blocks, a ragged right edge, a ragged bottom-right corner, then a
// vector and a scalar of their own.
struct Layout {
  at::Tensor matrix;  // 200 × 150: grid 3 × 3 of 64 × 48 (192 × 144), edges of 8 rows and 6 columns
  at::Tensor stack;   // the blocks, stacked: 9 of 64 × 48, 3 of 64 × 6, 1 of 8 × 6
  at::Tensor vector_to, vector_from, scalar_to, scalar_from;

  explicit Layout(at::ScalarType dtype, uint64_t seed) {
    at::manual_seed(seed);
    matrix = at::randn({200, 150}, dtype);
    stack = at::randn({9 * 64 * 48 + 3 * 64 * 6 + 8 * 6}, dtype);
    vector_to = at::randn({37}, dtype);
    vector_from = at::randn({37}, dtype);
    scalar_to = at::randn({}, dtype);
    scalar_from = at::randn({}, dtype);
  }

  // Stack first (to gather) or matrix first (to write back, each destination
  // scaled by `scale` first where the transfer subtracts).
  std::vector<kernels::ViewPair> pairs(bool into_stack, double scale = 1.0) const {
    const std::vector<at::Tensor> in_stack = {stack.narrow(0, 0, 9 * 64 * 48).view({3, 3, 64, 48}),
        stack.narrow(0, 9 * 64 * 48, 3 * 64 * 6).view({3, 1, 64, 6}),
        stack.narrow(0, 9 * 64 * 48 + 3 * 64 * 6, 8 * 6).view({1, 1, 8, 6})};
    const std::vector<at::Tensor> in_matrix = {grid_of_blocks(matrix, 0, 0, 3, 3, 64, 48),
        grid_of_blocks(matrix, 0, 144, 3, 1, 64, 6), grid_of_blocks(matrix, 192, 144, 1, 1, 8, 6)};
    std::vector<kernels::ViewPair> result;
    for (size_t k = 0; k < in_stack.size(); ++k) {
      result.push_back(into_stack ? kernels::ViewPair{in_stack[k], in_matrix[k], scale}
                                  : kernels::ViewPair{in_matrix[k], in_stack[k], scale});
    }
    result.push_back({vector_to, vector_from, scale});
    result.push_back({scalar_to, scalar_from, scale});
    return result;
  }

  Layout clone() const {
    Layout copy = *this;
    copy.matrix = matrix.clone();
    copy.stack = stack.clone();
    copy.vector_to = vector_to.clone();
    copy.vector_from = vector_from.clone();
    copy.scalar_to = scalar_to.clone();
    copy.scalar_from = scalar_from.clone();
    return copy;
  }

  bool same_as(const Layout& other) const {
    return same_bits(matrix, other.matrix) && same_bits(stack, other.stack) && same_bits(vector_to, other.vector_to) &&
           same_bits(scalar_to, other.scalar_to);
  }
};

void aten_reference(const std::vector<kernels::ViewPair>& pairs, kernels::Transfer transfer) {
  for (const auto& pair : pairs) {
    auto to = pair.destination;
    if (transfer == kernels::Transfer::Copy) {
      to.copy_(pair.source);
    } else {
      if (pair.destination_scale != 1.0) to.mul_(pair.destination_scale);
      to.sub_(pair.source);
    }
  }
}

// ATen ops dispatched at the top level by `call` (views included: the loop issues none).
int64_t aten_ops_of(const std::function<void()>& call) {
  static thread_local int depth = 0;
  static thread_local int64_t counted = 0;
  auto handle = at::addGlobalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        if (depth++ == 0) ++counted;
        return nullptr;
      },
      [](const at::RecordFunction&, at::ObserverContext*) {
        --depth;
      }).scopes({at::RecordScope::FUNCTION}));
  counted = 0;
  call();
  at::removeCallback(handle);
  return counted;
}

TEST(MatrixTransfer, GathersAndWritesBackRegionsAsAtenDoesBitForBit) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (bool into_stack : {true, false}) {
      // 1 − lr·wd of a weight decay; not a power of two, so that c·d rounds.
      for (auto [transfer, scale] : {std::pair{kernels::Transfer::Copy, 1.0},
               std::pair{kernels::Transfer::Subtract, 1.0}, std::pair{kernels::Transfer::Subtract, 1.0 - 3e-3 * 0.1}}) {
        const Layout start(dtype, 7);
        auto expected = start.clone();
        aten_reference(expected.pairs(into_stack, scale), transfer);
        auto actual = start.clone();
        const auto pairs = actual.pairs(into_stack, scale);
        EXPECT_EQ(aten_ops_of([&] { kernels::transfer_matrices(pairs, transfer); }), 0) << "the loop took every pair";
        EXPECT_TRUE(actual.same_as(expected))
            << dtype << (into_stack ? " into the stack" : " into the matrix")
            << (transfer == kernels::Transfer::Copy ? ", copy" : ", subtract") << ", destination scale " << scale;
        EXPECT_FALSE(start.same_as(expected)) << "the transfer changed something";
      }
    }
  }
}

TEST(MatrixTransfer, AScaledSubtractionRoundsTheProductBeforeTheDifference) {
  // d = 1 + 2⁻²³, c = 1 − 2⁻²⁴, s = 1 in float32: c·d = 1 + 2⁻²⁴ − 2⁻⁴⁷ rounds to 1,
  // so mul_ then sub_ give 0, while a contracted (fused) c·d − s gives 2⁻²⁴ − 2⁻⁴⁷.
  // (It can fail only where the compiler may emit FMA: -march with FMA, aarch64.)
  const float d = 1.0f + std::ldexp(1.0f, -23);
  const double c = 1.0 - std::ldexp(1.0, -24);
  auto expected = at::full({4, 8}, d);
  expected.mul_(c).sub_(at::ones({4, 8}));
  auto actual = at::full({4, 8}, d);
  kernels::transfer_matrices({{actual, at::ones({4, 8}), c}}, kernels::Transfer::Subtract);
  EXPECT_TRUE(same_bits(actual, expected));
  EXPECT_EQ(actual[0][0].item<float>(), 0.0f);
}

TEST(MatrixTransfer, AListSplitOverTheCoresMovesEveryMatrixOnce) {
  // 40 parameters of 512 × 384 in 128 × 128 blocks (31 MB of float32 per side):
  // ranges of several MB, so the list is split wherever there are cores to split on.
  at::manual_seed(3);
  std::vector<at::Tensor> matrices;
  for (int k = 0; k < 40; ++k) matrices.push_back(at::randn({512, 384 + 2}).narrow(1, 1, 384));  // rows with gaps
  auto stack = at::randn({40 * 12, 128, 128});
  auto make_pairs = [&](const std::vector<at::Tensor>& ms, const at::Tensor& st, double scale) {
    std::vector<kernels::ViewPair> pairs;
    for (int k = 0; k < 40; ++k) {
      pairs.push_back(
          {grid_of_blocks(ms[k], 0, 0, 4, 3, 128, 128), st.narrow(0, 12 * k, 12).view({4, 3, 128, 128}), scale});
    }
    return pairs;
  };
  for (auto transfer : {kernels::Transfer::Subtract, kernels::Transfer::Copy}) {
    std::vector<at::Tensor> expected;
    std::vector<at::Tensor> actual;
    for (const auto& m : matrices) {
      expected.push_back(m.clone());
      actual.push_back(m.clone());
    }
    const double scale = transfer == kernels::Transfer::Copy ? 1.0 : 0.9997;
    aten_reference(make_pairs(expected, stack, scale), transfer);
    kernels::transfer_matrices(make_pairs(actual, stack, scale), transfer);
    for (int k = 0; k < 40; ++k) EXPECT_TRUE(same_bits(actual[k], expected[k])) << "parameter " << k;
  }
}

TEST(MatrixTransfer, HelperThreadsFlushDenormalsAsTheCallerDoes) {
  // One ATen thread: OpenMP's workers would keep the setting they started with,
  // and the split's passes go to dash's helpers only where ATen's pool has one.
  struct OneAtenThread {
    int saved = at::get_num_threads();
    OneAtenThread() { at::set_num_threads(1); }
    ~OneAtenThread() { at::set_num_threads(saved); }
  } one_thread;
  // 30 MB: split wherever there are cores. Both operands are normal and every
  // difference a float32 denormal, which the caller's setting flushes to zero on
  // every thread: the split's helper threads, kept from earlier splits, take the
  // caller's floating-point environment with each range.
  auto expected = at::full({60, 256, 512}, 2.0e-38f);
  auto actual = expected.clone();
  const auto subtrahend = at::full({60, 256, 512}, 1.5e-38f);
  auto warm_up = at::zeros_like(expected);
  kernels::transfer_matrices(
      {{warm_up, subtrahend}}, kernels::Transfer::Copy);  // helpers started before the setting changes
  if (!at::globalContext().setFlushDenormal(true)) GTEST_SKIP() << "no flush-to-zero on this CPU";
  expected.sub_(subtrahend);
  kernels::transfer_matrices({{actual, subtrahend}}, kernels::Transfer::Subtract);
  at::globalContext().setFlushDenormal(false);
  EXPECT_TRUE(same_bits(actual, expected));
  EXPECT_EQ(at::count_nonzero(expected).item<int64_t>(), 0) << "the reference flushed";
}

TEST(MatrixTransfer, PairsTheLoopCannotTakeGoToAten) {
  at::manual_seed(5);
  const auto source = at::randn({6, 5});
  auto check = [&](const at::Tensor& destination, const at::Tensor& from, kernels::Transfer transfer) {
    auto expected = destination.clone();
    auto actual = destination.clone();
    if (transfer == kernels::Transfer::Copy) {
      expected.copy_(from);
    } else {
      expected.sub_(from.to(expected.scalar_type()));
    }
    EXPECT_GT(aten_ops_of([&] { kernels::transfer_matrices({{actual, from}}, transfer); }), 0);
    EXPECT_TRUE(at::equal(actual, expected)) << destination.scalar_type() << " " << from.sizes();
  };
  for (auto transfer : {kernels::Transfer::Copy, kernels::Transfer::Subtract}) {
    check(at::zeros({6, 5}, at::kBFloat16), source, transfer);        // another dtype: converted first
    check(at::zeros({6, 5}), source.t().contiguous().t(), transfer);  // columns contiguous, not rows
    check(at::zeros({6, 5}), source.narrow(0, 0, 1), transfer);       // a row broadcast over the rows
    check(at::zeros({6, 5}), at::_neg_view(source), transfer);        // a lazy negation: its memory holds +s
  }
  check(at::zeros({6, 5}, at::kInt), source.to(at::kInt), kernels::Transfer::Subtract);  // integers: ATen's subtraction
  // Scaled bfloat16 destinations, three scales in one call: each is ATen's mul_ by
  // its own scale (a _foreach_mul_ per scale), then its sub_.
  std::vector<at::Tensor> weights;
  std::vector<kernels::ViewPair> scaled;
  const std::vector<double> scales = {0.75, 1.0, 0.5, 0.75};
  for (size_t k = 0; k < scales.size(); ++k) {
    weights.push_back(at::randn({6, 5}).to(at::kBFloat16));
    auto reference = weights.back().clone();
    if (scales[k] != 1.0) reference.mul_(scales[k]);
    reference.sub_(source.to(at::kBFloat16));
    scaled.push_back({weights.back(), source, scales[k]});
    weights.push_back(reference);
  }
  kernels::transfer_matrices(scaled, kernels::Transfer::Subtract);
  for (size_t k = 0; k < scales.size(); ++k) EXPECT_TRUE(at::equal(weights[2 * k], weights[2 * k + 1])) << k;
  EXPECT_THAT(error_of([&] {
    kernels::transfer_matrices({{weights[0], source, 0.75}}, kernels::Transfer::Copy);
  }),
      HasSubstr("a copy takes no destination scale"));
  // A destination of one element seen many times: ATen refuses to write it.
  auto expanded = at::zeros({1, 5}).expand({6, 5});
  EXPECT_THAT(error_of([&] {
    kernels::transfer_matrices({{expanded, source}}, kernels::Transfer::Copy);
  }),
      HasSubstr("single memory"));
  // Two views of one storage are ATen's business too (it knows their overlap).
  auto both = at::randn({4, 4});
  auto expected = both.clone();
  expected.narrow(0, 0, 2).sub_(expected.narrow(0, 2, 2));
  EXPECT_GT(aten_ops_of([&] {
    kernels::transfer_matrices({{both.narrow(0, 0, 2), both.narrow(0, 2, 2)}}, kernels::Transfer::Subtract);
  }),
      0);
  EXPECT_TRUE(same_bits(both, expected));
}

TEST(MatrixTransfer, AWriteCountsAsAnInPlaceChangeForAutograd) {
  auto parameter = at::randn({8, 6}).requires_grad_();
  const auto before = parameter._version();
  {
    const at::NoGradGuard no_grad;  // an optimizer's step
    kernels::transfer_matrices({{parameter.narrow(0, 0, 4), at::randn({4, 6})}}, kernels::Transfer::Subtract);
  }
  EXPECT_GT(parameter._version(), before) << "a view's write bumps its base's version, as ATen's sub_ does";
  // With grad mode on, a leaf that requires grad is ATen's, which refuses the write.
  EXPECT_THAT(error_of([&] {
    kernels::transfer_matrices({{parameter, at::randn({8, 6})}}, kernels::Transfer::Copy);
  }),
      HasSubstr("in-place operation"));
}

TEST(MatrixTransfer, EmptyListsAndEmptyTensorsIssueNoOp) {
  EXPECT_EQ(aten_ops_of([] { kernels::transfer_matrices({}, kernels::Transfer::Copy); }), 0);
  auto empty = at::zeros({0, 4});
  auto also = at::zeros({3, 0});
  const auto sources = std::vector<at::Tensor>{at::ones({0, 4}), at::ones({3, 0})};
  EXPECT_EQ(aten_ops_of([&] {
    kernels::transfer_matrices({{empty, sources[0]}, {also, sources[1]}}, kernels::Transfer::Subtract);
  }),
      0);
}

}  // namespace
}  // namespace dash::kernels
