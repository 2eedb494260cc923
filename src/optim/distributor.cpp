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
void decay_whole_parameters(const StepUpdates& updates) {
  std::map<double, std::vector<at::Tensor>> decayed;
  for (size_t i = 0; i < updates.params.size(); ++i) {
    if (updates.has_grad[i] && updates.decay[i] != 1.0) decayed[updates.decay[i]].push_back(updates.params[i]);
  }
  for (auto& [factor, params] : decayed) at::_foreach_mul_(params, factor);
}

// One process: W ← W·(1 − lr·wd) − lr·P straight from the stacks, a strided view
// per block region and one per AdamW parameter (spec §4 steps 1 and 9), all in one
// transfer (linalg/matrix_transfer.h).
class LocalDistributor final : public Distributor {
 public:
  bool computes_every_block() const override { return true; }
  int64_t communicated_bytes_per_step() const override { return 0; }

  void gather_updates(const StepUpdates&, PhaseProfile&) override {}

  void apply_updates(const StepUpdates& updates, PhaseProfile& profile) override {
    ScopedPhase phase(profile, Phase::Copies);
    const auto& plan = updates.plan;
    // Each parameter as its (rows, cols) matrix: a view, or a copy (written back
    // below) for a parameter whose shape cannot be viewed as one.
    std::vector<at::Tensor> matrices(updates.params.size());
    std::vector<linalg::ViewPair> regions;
    // On a CPU the decay rides on the write-back's pass; elsewhere it goes first over
    // whole parameters (regions narrower than their parameter are not dense, and a
    // GPU's foreach would launch once per region).
    const bool decay_in_pass = updates.params.empty() || updates.params.front().is_cpu();
    if (!decay_in_pass) decay_whole_parameters(updates);
    auto decay_of = [&](size_t i) { return decay_in_pass ? updates.decay[i] : 1.0; };
    for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
      for (const auto& region : plan.gradient_stacks[s].regions) {
        const auto i = static_cast<size_t>(region.param);
        if (!updates.has_grad[i]) continue;
        if (!matrices[i].defined()) matrices[i] = blocking::as_matrix(updates.params[i], plan.parameters[i].view);
        regions.push_back({blocking::region_in_matrix(matrices[i], region),
            blocking::region_in_stack(updates.stack_updates[s], region), decay_of(i)});
      }
    }
    for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
      const auto& segment = plan.adamw_segments[j];
      for (auto i : segment.params) {
        if (!updates.has_grad[i]) continue;
        const auto& slot = plan.parameters[i];
        regions.push_back({updates.params[i],
            updates.adamw_update.narrow(0, updates.segment_offsets[j] + slot.offset - segment.offset, slot.numel)
                .view(updates.params[i].sizes()),
            decay_of(i)});
      }
    }
    linalg::transfer_matrices(regions, linalg::Transfer::Subtract);
    for (size_t i = 0; i < updates.params.size(); ++i) {
      if (matrices[i].defined() && !matrices[i].is_alias_of(updates.params[i])) {
        updates.params[i].copy_(matrices[i].view(updates.params[i].sizes()));
      }
    }
  }
};

// A rank of several: its updates go to their flat positions, one all-gather brings
// every rank's, and every parameter is updated from the flat buffer.
class AllGatherDistributor final : public Distributor {
 public:
  AllGatherDistributor(const DistributedContext& context, blocking::StackPlan& plan,
      const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options) {
    const auto split = distributed::split_work(plan, context.world_size());
    std::vector<std::vector<int64_t>> positions;
    for (int64_t rank = 0; rank < context.world_size(); ++rank) {
      positions.push_back(distributed::owned_positions(plan, split, rank));
    }
    exchange_ = std::make_unique<distributed::UpdateExchange>(context, positions, plan.flat_numel, options.device());
    plan = distributed::plan_for_rank(plan, split, context.rank(), blocking);
    flat_update_ = at::empty({plan.flat_numel + 1}, options);
  }

  bool computes_every_block() const override { return false; }
  int64_t communicated_bytes_per_step() const override { return exchange_->bytes_per_step(); }

  void gather_updates(const StepUpdates& updates, PhaseProfile& profile) override {
    const auto& plan = updates.plan;
    {
      ScopedPhase phase(profile, Phase::Copies);
      std::vector<linalg::ViewPair> regions;
      for (size_t s = 0; s < plan.gradient_stacks.size(); ++s) {
        for (const auto& region : plan.gradient_stacks[s].regions) {
          const auto& slot = plan.parameters[region.param];
          auto flat = flat_update_.narrow(0, slot.offset, slot.numel).view({slot.view.rows, slot.view.cols});
          regions.push_back(
              {blocking::region_in_matrix(flat, region), blocking::region_in_stack(updates.stack_updates[s], region)});
        }
      }
      for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
        const auto& segment = plan.adamw_segments[j];
        regions.push_back({flat_update_.narrow(0, segment.offset, segment.numel),
            updates.adamw_update.narrow(0, updates.segment_offsets[j], segment.numel)});
      }
      linalg::transfer_matrices(regions, linalg::Transfer::Copy);
    }
    ScopedPhase phase(profile, Phase::Communication);
    exchange_->exchange(flat_update_);
  }

  void apply_updates(const StepUpdates& updates, PhaseProfile& profile) override {
    const auto& plan = updates.plan;
    ScopedPhase phase(profile, Phase::Copies);
    std::vector<at::Tensor> targets;
    std::vector<at::Tensor> flat_updates;
    for (size_t i = 0; i < updates.params.size(); ++i) {
      const auto& slot = plan.parameters[i];
      if (!updates.has_grad[i] || slot.numel == 0) continue;
      targets.push_back(updates.params[i]);
      auto update = flat_update_.narrow(0, slot.offset, slot.numel).view(updates.params[i].sizes());
      flat_updates.push_back(
          updates.params[i].scalar_type() == at::kFloat ? update : update.to(updates.params[i].scalar_type()));
    }
    decay_whole_parameters(updates);
    if (!targets.empty()) at::_foreach_add_(targets, flat_updates, -1.0);
  }

 private:
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
