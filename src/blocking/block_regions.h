#pragma once

// How the blocks of a gradient stack map onto their parameters without a flat
// buffer (spec §3): consecutive blocks of one parameter that form a rectangular
// grid of equal blocks are one region, and a region is moved between the
// parameter and the stack with one strided copy — a (grid_rows, grid_cols,
// block_rows, block_cols) view on each side. A parameter that tiles into B × B
// blocks is one region per stack; ragged edges add at most three more.

#include "blocking/block_layout.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash::blocking {

struct BlockRegion {
  int64_t param = 0;  ///< parameter index
  int64_t first = 0;  ///< first block of the region in the stack
  int64_t row = 0;    ///< top-left element in the parameter's matrix view
  int64_t col = 0;
  int64_t grid_rows = 0;   ///< blocks down
  int64_t grid_cols = 0;   ///< blocks across
  int64_t block_rows = 0;  ///< rows of each block
  int64_t block_cols = 0;

  int64_t count() const { return grid_rows * grid_cols; }
};

/// Merges the blocks of a stack, in stack order (`params[i]` owns `blocks[i]`),
/// into maximal regions: runs across a row of the block grid, then equal runs on
/// consecutive rows. Every block is in exactly one region, in order.
std::vector<BlockRegion> merge_into_regions(const std::vector<int64_t>& params, const std::vector<Block>& blocks);

/// The blocks `blocks` of a stack (ascending block numbers) as pieces of `regions`
/// (the stack's regions, in stack order), each piece's `first` its position in
/// `blocks`: what moves those blocks between their parameters and a compact
/// (blocks.size(), block_rows, block_cols) buffer. A run of consecutive blocks is
/// cut where it leaves a region and, within one, into at most three rectangles of
/// its grid (the rest of a grid row, whole rows, the start of a row), so a run that
/// covers whole regions keeps them whole.
std::vector<BlockRegion> regions_of_blocks(const std::vector<BlockRegion>& regions, const std::vector<int64_t>& blocks);

/// A parameter (or its gradient) as its (rows, cols) matrix: a view for any tensor
/// whose shape can be viewed (parameters and gradients, in practice), a copy otherwise.
at::Tensor as_matrix(const at::Tensor& tensor, const MatrixView& view);

/// The region's blocks in `matrix` (the parameter's (rows, cols) matrix view, any
/// strides) as a (grid_rows, grid_cols, block_rows, block_cols) view.
at::Tensor region_in_matrix(const at::Tensor& matrix, const BlockRegion& region);

/// The region's blocks in `stack` ((count, block_rows, block_cols)) as a
/// (grid_rows, grid_cols, block_rows, block_cols) view.
at::Tensor region_in_stack(const at::Tensor& stack, const BlockRegion& region);

}  // namespace dash::blocking
