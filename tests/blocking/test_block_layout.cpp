// Shape math of blocking: matrix views and block partitions.

#include "blocking/block_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace dash::blocking {
namespace {

TEST(MatrixView, SqueezesAndMergesDimensions) {
  auto scalar = matrix_view({});
  EXPECT_EQ(scalar.kind, ParameterKind::Scalar);
  EXPECT_EQ(matrix_view({1, 1}).kind, ParameterKind::Scalar);
  auto vector = matrix_view({1, 7, 1});
  EXPECT_EQ(vector.kind, ParameterKind::Vector);
  EXPECT_EQ(vector.rows, 7);
  EXPECT_EQ(vector.cols, 1);
  auto matrix = matrix_view({5, 1, 3});
  EXPECT_EQ(matrix.kind, ParameterKind::Matrix);
  EXPECT_EQ(matrix.rows, 5);
  EXPECT_EQ(matrix.cols, 3);
  // Conv weight (o, i, kh, kw) = (64, 32, 3, 3): splits give 64×288, 2048×9,
  // 18432×3; the smallest larger side is 64×288, the spec's (o, i·kh·kw).
  auto conv = matrix_view({64, 32, 3, 3});
  EXPECT_EQ(conv.rows, 64);
  EXPECT_EQ(conv.cols, 288);
  // (2, 3, 3): 2×9 or 6×3 → 6×3.
  auto cube = matrix_view({2, 3, 3});
  EXPECT_EQ(cube.rows, 6);
  EXPECT_EQ(cube.cols, 3);
}

// Every element of a rows × cols matrix is in exactly one block, blocks are at most
// B × B, and only the last row/column of blocks is ragged.
TEST(Partition, CoversEveryElementOnceForRaggedShapes) {
  for (auto [rows, cols, b] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {3, 2, 2}, {7, 5, 3}, {8, 8, 4}, {1, 9, 4}, {10, 1, 3}, {5, 5, 100}}) {
    std::vector<int> covered(rows * cols, 0);
    for (const auto& block : partition(rows, cols, b)) {
      EXPECT_LE(block.rows, b);
      EXPECT_LE(block.cols, b);
      EXPECT_TRUE(block.rows == b || block.row + block.rows == rows);
      EXPECT_TRUE(block.cols == b || block.col + block.cols == cols);
      for (int64_t r = 0; r < block.rows; ++r) {
        for (int64_t c = 0; c < block.cols; ++c) ++covered[(block.row + r) * cols + block.col + c];
      }
    }
    for (int count : covered) EXPECT_EQ(count, 1) << rows << "x" << cols << " B=" << b;
  }
}

TEST(Partition, GridOrderAndCount) {
  auto blocks = partition(5, 3, 2);  // rows [2, 2, 1] × cols [2, 1]
  ASSERT_EQ(blocks.size(), 6u);
  EXPECT_EQ(blocks[1].col, 2);
  EXPECT_EQ(blocks[1].cols, 1);
  EXPECT_EQ(blocks[5].rows, 1);
  EXPECT_EQ(blocks[5].cols, 1);
  EXPECT_THROW(partition(4, 4, 0), c10::Error);
}

}  // namespace
}  // namespace dash::blocking
