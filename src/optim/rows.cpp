#include "optim/rows.h"

#include "kernels/scratch.h"
#include "optim/host_masks.h"
#include "optim/workspace_budget.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>

namespace dash::optim {

Rows Rows::all(int64_t count) {
  Rows rows;
  rows.everything_ = true;
  for (int64_t b = 0; b < count; ++b) rows.blocks_.push_back(b);
  return rows;
}

Rows Rows::range(int64_t start, int64_t length) {
  Rows rows;
  for (int64_t b = start; b < start + length; ++b) rows.blocks_.push_back(b);
  return rows;
}

Rows Rows::subset(std::vector<int64_t> blocks, at::Tensor indices) {
  TORCH_CHECK(indices.numel() == static_cast<int64_t>(blocks.size()), "dash: Rows::subset: ", indices.numel(),
      " indices for ", blocks.size(), " blocks");
  Rows rows;
  rows.indices_ = std::move(indices);
  rows.blocks_ = std::move(blocks);
  return rows;
}

at::Tensor Rows::take(const at::Tensor& full, kernels::Scratch* scratch) const {
  if (indices_.defined()) {
    if (scratch == nullptr) return full.index_select(0, indices_);
    auto sizes = full.sizes().vec();
    sizes[0] = indices_.numel();
    auto part = scratch->empty(sizes, full.options());
    return at::index_select_out(part, full, 0, indices_);
  }
  if (everything_) return full;
  return full.narrow(0, blocks_.front(), static_cast<int64_t>(blocks_.size()));
}

void Rows::put(at::Tensor& full, const at::Tensor& part) const {
  if (indices_.defined()) full.index_copy_(0, indices_, part);
}

std::vector<BlockRun> consecutive_runs(const std::vector<int64_t>& blocks) {
  std::vector<BlockRun> runs;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (runs.empty() || blocks[i] != runs.back().block + runs.back().length) {
      runs.push_back({static_cast<int64_t>(i), blocks[i], 0});
    }
    ++runs.back().length;
  }
  return runs;
}

std::vector<Rows> chunk_rows(const std::vector<int64_t>& active, int64_t stack_count, int64_t chunk_size,
    const c10::Device& device, at::Tensor& kept_indices) {
  std::vector<Rows> chunks;
  at::Tensor indices;  // of the active blocks
  int64_t position = 0;
  for (auto& blocks : split_into_chunks(active, chunk_size)) {
    const auto length = static_cast<int64_t>(blocks.size());
    if (length == stack_count) {
      chunks.push_back(Rows::all(length));
    } else if (blocks.back() - blocks.front() + 1 == length) {
      chunks.push_back(Rows::range(blocks.front(), length));
    } else if (const auto runs = consecutive_runs(blocks); static_cast<int64_t>(runs.size()) <= kMostRunsPerChunk) {
      for (const auto& run : runs) chunks.push_back(Rows::range(run.block, run.length));
    } else {
      if (!indices.defined()) indices = values_into(kept_indices, active, device);
      chunks.push_back(Rows::subset(std::move(blocks), indices.narrow(0, position, length)));
    }
    position += length;
  }
  return chunks;
}

}  // namespace dash::optim
