#pragma once

// Which blocks of a stack a piece of the step's work touches, and how a stack's
// blocks with a gradient are cut into such pieces (chunks).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace dash::kernels {
class Scratch;
}  // namespace dash::kernels

namespace dash::optim {

/// Which blocks of a stack a piece of work touches. `take` gives the part of a
/// stacked tensor those blocks own; `put` writes a modified part back (a no-op
/// for views, which were modified in place).
class Rows {
 public:
  static Rows all(int64_t count);
  static Rows range(int64_t start, int64_t length);
  /// `indices`: `blocks` as an int64 tensor on the stack's device.
  static Rows subset(std::vector<int64_t> blocks, at::Tensor indices);

  /// A view, or for a subset a copy: into a buffer of `scratch` where one is given
  /// (kept across steps, so that a step allocates nothing; the buffer is free again
  /// once the caller lets the copy go), else a new tensor.
  at::Tensor take(const at::Tensor& full, kernels::Scratch* scratch = nullptr) const;
  /// Writes back a part that take() gathered (a no-op for views, which were modified in place).
  void put(at::Tensor& full, const at::Tensor& part) const;
  /// The block numbers, on the host.
  const std::vector<int64_t>& blocks() const { return blocks_; }

 private:
  std::vector<int64_t> blocks_;
  bool everything_ = false;
  at::Tensor indices_;  // defined: gathered copies
};

/// A run of consecutive blocks in a list of them: the list's entries from
/// `position` on are `block`, `block` + 1, … (`length` of them).
struct BlockRun {
  int64_t position = 0;
  int64_t block = 0;
  int64_t length = 0;
};

/// The maximal runs of consecutive numbers in `blocks`, in order: a part of a stack
/// that many blocks share is a slice per run, without an index tensor.
std::vector<BlockRun> consecutive_runs(const std::vector<int64_t>& blocks);

/// How many runs of blocks a chunk may be worked in, one after another, rather than
/// gathered by index: a subset copies its blocks' factors and moments out of their
/// stacks and back, a run works on them where they are at the price of launching the
/// chunk's work once more. A stack's blocks without a gradient (a parameter unused
/// this step) leave a few long runs; scattered ones many short runs.
inline constexpr int64_t kMostRunsPerChunk = 4;

/// The blocks `active` (ascending) of a stack of `stack_count` blocks in chunks of
/// at most `chunk_size`: each the whole stack, a range of it, or, where a chunk's
/// blocks are not one range, its runs (at most kMostRunsPerChunk) or a subset (whose
/// indices go to `device` once for all chunks, not once per chunk or phase, into
/// `kept_indices`, a buffer kept across steps: host_masks.h, values_into). The
/// subsets index `kept_indices`: they hold until the next call with that buffer.
std::vector<Rows> chunk_rows(const std::vector<int64_t>& active, int64_t stack_count, int64_t chunk_size,
    const c10::Device& device, at::Tensor& kept_indices);

}  // namespace dash::optim
