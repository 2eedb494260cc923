#pragma once

// Shape math of DASH blocking (spec §3): how a parameter is viewed as a matrix
// and cut into blocks of at most B × B. Pure functions of shapes.

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace dash::blocking {

/// How a parameter is treated.
enum class ParameterKind {
  Scalar,  ///< no dimension of size > 1 (0-D, or all size-1): AdamW
  Vector,  ///< one dimension of size > 1: AdamW or 1-D Shampoo
  Matrix,  ///< two or more: a (rows × cols) matrix view, blocked
};

struct MatrixView {
  ParameterKind kind = ParameterKind::Scalar;
  int64_t rows = 1;
  int64_t cols = 1;
};

/// Squeezes size-1 dimensions; order ≥ 3 is merged into rows = d₀⋯d_{k−1},
/// cols = d_k⋯ with the split k that minimises max(rows, cols) (a conv weight
/// (o, i, kh, kw) becomes (o, i·kh·kw) when o ≥ i·kh·kw is not smaller). A vector
/// of n is the column (n × 1).
MatrixView matrix_view(c10::IntArrayRef sizes);

/// One block of a matrix view: rows [row, row + rows), cols [col, col + cols).
struct Block {
  int64_t row = 0;
  int64_t col = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

/// Blocks of at most `block_size` per side, row-major over the block grid: full
/// blocks and ragged edge blocks (r × B, B × c, r × c). Any shape works.
std::vector<Block> partition(int64_t rows, int64_t cols, int64_t block_size);

}  // namespace dash::blocking
