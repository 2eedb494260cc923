#include "blocking/block_regions.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

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

}  // namespace

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
