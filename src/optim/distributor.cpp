#include "optim/distributor.h"

#include "distributed/update_exchange.h"
#include "distributed/work_split.h"
#include "linalg/matrix_transfer.h"

#include <ATen/ATen.h>

#include <map>

namespace dash::optim {
namespace {

// W ← W·(1 − lr·wd) for every parameter that takes a step and decays, one
// _foreach_mul_ per factor over whole parameters (dense, so one launch per factor
// on a GPU).
void decay_whole_parameters(const StepWrite& step) {
  std::map<double, std::vector<at::Tensor>> decayed;
  for (size_t i = 0; i < step.params.size(); ++i) {
    if (step.has_grad[i] && step.decay[i] != 1.0) decayed[step.decay[i]].push_back(step.params[i]);
  }
  for (auto& [factor, params] : decayed) at::_foreach_mul_(params, factor);
}

// The chunk-by-chunk part every scheme shares: write_blocks() takes a chunk's
// block regions (blocking::regions_of_blocks) as (destination, update) pairs, and
// flush_updates() moves the pairs taken since the last flush in one transfer.
class PiecewiseDistributor : public Distributor {
 public:
  explicit PiecewiseDistributor(linalg::Transfer transfer) : transfer_(transfer) {}

  void write_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks, const at::Tensor& updates,
      PhaseProfile& profile) final {
    ScopedPhase phase(profile, Phase::Copies);
    for (const auto& piece : blocking::regions_of_blocks(step.plan.gradient_stacks[stack].regions, blocks)) {
      pending_.push_back(
          {destination(step, piece), blocking::region_in_stack(updates, piece), destination_scale(step, piece.param)});
    }
  }

  void flush_updates(PhaseProfile& profile) final {
    ScopedPhase phase(profile, Phase::Copies);
    linalg::transfer_matrices(pending_, transfer_);
    pending_.clear();
  }

 protected:
  /// Where a piece of a chunk's updates goes: a view of the piece's shape.
  virtual at::Tensor destination(const StepWrite& step, const blocking::BlockRegion& piece) = 0;
  /// Subtract's factor on parameter `param`'s destination (1 for Copy).
  virtual double destination_scale(const StepWrite& /*step*/, int64_t /*param*/) const { return 1.0; }

  std::vector<linalg::ViewPair> pending_;

 private:
  linalg::Transfer transfer_;
};

// One process: W ← W·(1 − lr·wd) − lr·P straight from the blocks' updates, a
// strided view per piece of a block region and one per AdamW parameter (spec §4
// steps 1 and 9), the pieces taken since the last flush in one transfer
// (linalg/matrix_transfer.h).
class LocalDistributor final : public PiecewiseDistributor {
 public:
  LocalDistributor() : PiecewiseDistributor(linalg::Transfer::Subtract) {}

  bool computes_every_block() const override { return true; }
  int64_t communicated_bytes_per_step() const override { return 0; }
  int64_t workspace_bytes() const override { return 0; }

  void begin_updates(const StepWrite& step) override {
    matrices_.assign(step.params.size(), at::Tensor());
    pending_.clear();
    // On a CPU the decay rides on the write-back's pass; elsewhere it goes first over
    // whole parameters (regions narrower than their parameter are not dense, and a
    // GPU's foreach would launch once per region).
    decay_in_pass_ = step.params.empty() || step.params.front().is_cpu();
    if (!decay_in_pass_) decay_whole_parameters(step);
  }

  void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) override {
    const auto& plan = step.plan;
    for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
      const auto& segment = plan.adamw_segments[j];
      for (auto i : segment.params) {
        const auto& slot = plan.parameters[i];
        if (!step.has_grad[i] || slot.numel == 0) continue;
        pending_.push_back({step.params[i],
            adamw_update.narrow(0, segment_offsets[j] + slot.offset - segment.offset, slot.numel)
                .view(step.params[i].sizes()),
            destination_scale(step, i)});
      }
    }
    flush_updates(profile);
    ScopedPhase phase(profile, Phase::Copies);
    for (size_t i = 0; i < step.params.size(); ++i) {
      if (matrices_[i].defined() && !matrices_[i].is_alias_of(step.params[i])) {
        step.params[i].copy_(matrices_[i].view(step.params[i].sizes()));
      }
    }
    matrices_.clear();
  }

 private:
  // In the parameter's (rows, cols) matrix: a view, or a copy (written back by
  // finish_updates()) for a parameter whose shape cannot be viewed as one.
  at::Tensor destination(const StepWrite& step, const blocking::BlockRegion& piece) override {
    auto& matrix = matrices_[piece.param];
    if (!matrix.defined())
      matrix = blocking::as_matrix(step.params[piece.param], step.plan.parameters[piece.param].view);
    return blocking::region_in_matrix(matrix, piece);
  }
  double destination_scale(const StepWrite& step, int64_t param) const override {
    return decay_in_pass_ ? step.decay[param] : 1.0;
  }

  std::vector<at::Tensor> matrices_;
  bool decay_in_pass_ = true;
};

// A rank of several: its updates go to their flat positions, one all-gather brings
// every rank's, and every parameter is updated from the flat buffer.
class AllGatherDistributor final : public PiecewiseDistributor {
 public:
  AllGatherDistributor(const DistributedContext& context, blocking::StackPlan& plan,
      const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options)
      : PiecewiseDistributor(linalg::Transfer::Copy) {
    const auto split = distributed::split_work(plan, context.world_size());
    std::vector<std::vector<int64_t>> positions;
    for (int64_t rank = 0; rank < context.world_size(); ++rank) {
      positions.push_back(distributed::owned_positions(plan, split, rank));
    }
    exchange_ = std::make_unique<distributed::UpdateExchange>(context, positions, plan.flat_numel, options.device());
    plan = distributed::plan_for_rank(plan, split, context.rank(), blocking);
    // Zeros: the positions of parameters without a gradient are exchanged unread.
    flat_update_ = at::zeros({plan.flat_numel + 1}, options);
  }

  bool computes_every_block() const override { return false; }
  int64_t communicated_bytes_per_step() const override { return exchange_->bytes_per_step(); }
  int64_t workspace_bytes() const override { return flat_update_.nbytes() + exchange_->buffer_bytes(); }

  void begin_updates(const StepWrite&) override { pending_.clear(); }

  void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) override {
    // The segments are contiguous in the flat buffer: one pair each.
    const auto& plan = step.plan;
    for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
      const auto& segment = plan.adamw_segments[j];
      pending_.push_back({flat_update_.narrow(0, segment.offset, segment.numel),
          adamw_update.narrow(0, segment_offsets[j], segment.numel)});
    }
    flush_updates(profile);
    {
      ScopedPhase phase(profile, Phase::Communication);
      exchange_->exchange(flat_update_);
    }
    ScopedPhase phase(profile, Phase::Copies);
    std::vector<at::Tensor> targets;
    std::vector<at::Tensor> flat_updates;
    for (size_t i = 0; i < step.params.size(); ++i) {
      const auto& slot = plan.parameters[i];
      if (!step.has_grad[i] || slot.numel == 0) continue;
      targets.push_back(step.params[i]);
      auto update = flat_update_.narrow(0, slot.offset, slot.numel).view(step.params[i].sizes());
      flat_updates.push_back(
          step.params[i].scalar_type() == at::kFloat ? update : update.to(step.params[i].scalar_type()));
    }
    decay_whole_parameters(step);
    if (!targets.empty()) at::_foreach_add_(targets, flat_updates, -1.0);
  }

 private:
  // In the flat buffer, viewed as the parameter's (rows, cols) matrix.
  at::Tensor destination(const StepWrite& step, const blocking::BlockRegion& piece) override {
    const auto& slot = step.plan.parameters[piece.param];
    return blocking::region_in_matrix(
        flat_update_.narrow(0, slot.offset, slot.numel).view({slot.view.rows, slot.view.cols}), piece);
  }

  std::unique_ptr<distributed::UpdateExchange> exchange_;
  at::Tensor flat_update_;  ///< plan.flat_numel elements + 1 scratch, all-gathered
};

}  // namespace

std::unique_ptr<Distributor> make_distributor(const DistributedContext* context, blocking::StackPlan& plan,
    const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options) {
  if (context != nullptr && context->world_size() > 1) {
    return std::make_unique<AllGatherDistributor>(*context, plan, blocking, options);
  }
  return std::make_unique<LocalDistributor>();
}

}  // namespace dash::optim
