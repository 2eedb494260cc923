#include "blocking/block_layout.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>

namespace dash::blocking {

MatrixView matrix_view(c10::IntArrayRef sizes) {
  std::vector<int64_t> kept;
  for (auto size : sizes) {
    if (size != 1) kept.push_back(size);
  }
  if (kept.empty()) return {ParameterKind::Scalar, 1, 1};
  if (kept.size() == 1) return {ParameterKind::Vector, kept[0], 1};
  MatrixView best{ParameterKind::Matrix, 0, 0};
  int64_t best_side = std::numeric_limits<int64_t>::max();
  for (size_t split = 1; split < kept.size(); ++split) {
    int64_t rows = 1;
    int64_t cols = 1;
    for (size_t d = 0; d < kept.size(); ++d) (d < split ? rows : cols) *= kept[d];
    if (std::max(rows, cols) < best_side) {
      best_side = std::max(rows, cols);
      best = {ParameterKind::Matrix, rows, cols};
    }
  }
  return best;
}

std::vector<Block> partition(int64_t rows, int64_t cols, int64_t block_size) {
  TORCH_CHECK(block_size >= 1, "dash: block_size must be >= 1, got ", block_size);
  std::vector<Block> blocks;
  for (int64_t row = 0; row < rows; row += block_size) {
    for (int64_t col = 0; col < cols; col += block_size) {
      blocks.push_back({row, col, std::min(block_size, rows - row), std::min(block_size, cols - col)});
    }
  }
  return blocks;
}

}  // namespace dash::blocking
