#include "blocking/block_regions.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::blocking {
namespace {

bool same_block_shape(const BlockRegion& region, const Block& block) {
  return region.block_rows == block.rows && region.block_cols == block.cols;
}

// The next block of a one-row region: same parameter and row, just to the right.
bool extends_run(const BlockRegion& run, int64_t param, const Block& block) {
  return run.param == param && run.grid_rows == 1 && same_block_shape(run, block) && block.row == run.row &&
         block.col == run.col + run.grid_cols * run.block_cols;
}

// `run` (one row) lies directly below `region` and spans the same columns.
bool extends_downwards(const BlockRegion& region, const BlockRegion& run) {
  return region.param == run.param && region.block_rows == run.block_rows && region.block_cols == run.block_cols &&
         region.col == run.col && region.grid_cols == run.grid_cols &&
         run.row == region.row + region.grid_rows * region.block_rows;
}

// Blocks [start, start + count) of `region`'s grid (row-major) as one rectangle:
// they lie within one grid row or cover whole rows.
BlockRegion grid_piece(const BlockRegion& region, int64_t start, int64_t count, int64_t position) {
  BlockRegion piece = region;
  piece.first = position;
  piece.row = region.row + (start / region.grid_cols) * region.block_rows;
  piece.col = region.col + (start % region.grid_cols) * region.block_cols;
  const bool whole_rows = start % region.grid_cols == 0 && count % region.grid_cols == 0;
  piece.grid_rows = whole_rows ? count / region.grid_cols : 1;
  piece.grid_cols = whole_rows ? region.grid_cols : count;
  return piece;
}

// Appends blocks [start, start + count) of `region`'s grid, placed from `position`
// on, as at most three rectangles.
void append_grid_run(
    std::vector<BlockRegion>& pieces, const BlockRegion& region, int64_t start, int64_t count, int64_t position) {
  const int64_t width = region.grid_cols;
  if (start % width != 0) {  // the rest of a grid row
    const int64_t head = std::min(count, width - start % width);
    pieces.push_back(grid_piece(region, start, head, position));
    start += head, count -= head, position += head;
  }
  if (count >= width) {  // whole rows
    const int64_t body = count - count % width;
    pieces.push_back(grid_piece(region, start, body, position));
    start += body, count -= body, position += body;
  }
  if (count > 0) pieces.push_back(grid_piece(region, start, count, position));  // the start of a row
}

}  // namespace

std::vector<BlockRegion> regions_of_blocks(
    const std::vector<BlockRegion>& regions, const std::vector<int64_t>& blocks) {
  std::vector<BlockRegion> pieces;
  size_t r = 0;  // regions are in stack order, and so are the blocks
  for (size_t i = 0; i < blocks.size();) {
    TORCH_CHECK(i == 0 || blocks[i] > blocks[i - 1], "dash: regions_of_blocks: block numbers must ascend, got ",
        blocks[i - 1], " then ", blocks[i]);
    while (r < regions.size() && regions[r].first + regions[r].count() <= blocks[i]) ++r;
    TORCH_CHECK(r < regions.size() && regions[r].first <= blocks[i], "dash: regions_of_blocks: block ", blocks[i],
        " is in no region");
    const auto& region = regions[r];
    const int64_t end = region.first + region.count();
    // The run of consecutive blocks from i that stays within this region.
    size_t j = i + 1;
    while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1 && blocks[j] < end) ++j;
    append_grid_run(pieces, region, blocks[i] - region.first, static_cast<int64_t>(j - i), static_cast<int64_t>(i));
    i = j;
  }
  return pieces;
}

std::vector<BlockRegion> merge_into_regions(const std::vector<int64_t>& params, const std::vector<Block>& blocks) {
  TORCH_CHECK(params.size() == blocks.size(), "dash: merge_into_regions: ", params.size(), " owners for ",
      blocks.size(), " blocks");
  std::vector<BlockRegion> runs;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& block = blocks[i];
    if (!runs.empty() && extends_run(runs.back(), params[i], block)) {
      ++runs.back().grid_cols;
    } else {
      runs.push_back({params[i], static_cast<int64_t>(i), block.row, block.col, 1, 1, block.rows, block.cols});
    }
  }
  std::vector<BlockRegion> regions;
  for (const auto& run : runs) {
    if (!regions.empty() && extends_downwards(regions.back(), run)) {
      ++regions.back().grid_rows;
    } else {
      regions.push_back(run);
    }
  }
  return regions;
}

at::Tensor as_matrix(const at::Tensor& tensor, const MatrixView& view) {
  return tensor.reshape({view.rows, view.cols});
}

at::Tensor region_in_matrix(const at::Tensor& matrix, const BlockRegion& region) {
  // Splitting a dimension is a view whatever its stride, so this works on any
  // (rows, cols) tensor; only the permute makes it non-contiguous.
  return matrix.narrow(0, region.row, region.grid_rows * region.block_rows)
      .narrow(1, region.col, region.grid_cols * region.block_cols)
      .view({region.grid_rows, region.block_rows, region.grid_cols, region.block_cols})
      .permute({0, 2, 1, 3});
}

at::Tensor region_in_stack(const at::Tensor& stack, const BlockRegion& region) {
  return stack.narrow(0, region.first, region.count())
      .view({region.grid_rows, region.grid_cols, region.block_rows, region.block_cols});
}

}  // namespace dash::blocking
