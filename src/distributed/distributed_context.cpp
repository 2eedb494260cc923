#include <dash/distributed.h>

#include "distributed/collective_wait.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dash {

DistributedContext::DistributedContext(c10::intrusive_ptr<ProcessGroup> group, DistributedOptions options)
    : group_(std::move(group)), options_(options) {
  TORCH_CHECK(group_, "dash::DistributedContext: the process group is null");
  TORCH_CHECK(options_.timeout().count() > 0, "dash::DistributedContext: timeout must be > 0 ms, got ",
      options_.timeout().count());
}

int64_t DistributedContext::rank() const { return group_->getRank(); }
int64_t DistributedContext::world_size() const { return group_->getSize(); }

void DistributedContext::average(const std::vector<at::Tensor>& tensors) const {
  if (tensors.empty() || world_size() == 1) return;
  std::vector<at::Tensor> flat_pieces;
  for (const auto& tensor : tensors) {
    TORCH_CHECK(tensor.defined() && tensor.scalar_type() == at::kFloat && tensor.device() == tensors[0].device(),
        "dash::DistributedContext::average: tensors must be defined float32 tensors on one device");
    flat_pieces.push_back(tensor.reshape(-1));
  }
  std::vector<at::Tensor> buffer{at::cat(flat_pieces)};
  distributed::wait_for_collective(group_->allreduce(buffer), *this, "gradient all-reduce");
  buffer[0].div_(static_cast<double>(world_size()));
  int64_t offset = 0;
  for (const auto& tensor : tensors) {
    tensor.copy_(buffer[0].narrow(0, offset, tensor.numel()).view_as(tensor));
    offset += tensor.numel();
  }
}

void DistributedContext::check_same_on_all_ranks(
    const std::string& description, const at::Device& device, const std::string& what) const {
  if (world_size() == 1) return;
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a
  for (const unsigned char c : description) hash = (hash ^ c) * 0x100000001b3ULL;
  const auto value = static_cast<int64_t>(hash >> 1);  // non-negative, so −value cannot overflow
  // max(h) and max(−h) = −min(h) in one all-reduce: all equal iff max = min.
  std::vector<at::Tensor> buffer{at::tensor({value, -value}, at::TensorOptions().dtype(at::kLong)).to(device)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  distributed::wait_for_collective(
      group_->allreduce(buffer, options), *this, "check that all ranks agree on the " + what);
  const auto extremes = buffer[0].cpu();
  TORCH_CHECK(extremes[0].item<int64_t>() == -extremes[1].item<int64_t>(), "dash: rank ", rank(), " of ", world_size(),
      ": the ranks disagree about the ", what,
      "; distributed DASH needs the same parameters and options on every rank. This rank has:\n", description);
}

}  // namespace dash
