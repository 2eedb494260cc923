#include "optim/distributor.h"

#include "distributed/rank_maximum.h"
#include "distributed/share_exchange.h"
#include "distributed/share_layout.h"
#include "distributed/work_split.h"
#include "kernels/matrix_transfer.h"
#include "optim/rows.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

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

// Tensors viewed as their parameters' (rows, cols) matrices, once per parameter: a
// view where the shape allows (in practice always), else a copy that write_back()
// returns to the tensor.
class MatrixViews {
 public:
  explicit MatrixViews(size_t count) : matrices_(count) {}

  at::Tensor& of(const at::Tensor& tensor, const blocking::StackPlan& plan, int64_t param) {
    auto& matrix = matrices_[static_cast<size_t>(param)];
    if (!matrix.defined()) matrix = blocking::as_matrix(tensor, plan.parameters[param].view);
    return matrix;
  }

  /// Copies the matrices that are not views back into `tensors`.
  void write_back(const std::vector<at::Tensor>& tensors) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (matrices_[i].defined() && !matrices_[i].is_alias_of(tensors[i])) {
        tensors[i].copy_(matrices_[i].view(tensors[i].sizes()));
      }
    }
  }

 private:
  std::vector<at::Tensor> matrices_;
};

// W ← W·(1 − lr·wd) − lr·P (spec §4 steps 1 and 9) from update pieces: a strided
// view per block region and one per AdamW parameter, the pieces taken since the
// last flush in one transfer (kernels/matrix_transfer.h).
class ParameterWriter {
 public:
  void begin(const StepWrite& step) {
    views_ = MatrixViews(step.params.size());
    pending_.clear();
    // On a CPU the decay rides on the write-back's pass; elsewhere it goes first over
    // whole parameters (regions narrower than their parameter are not dense, and a
    // GPU's foreach would launch once per region).
    decay_in_pass_ = step.params.empty() || step.params.front().is_cpu();
    if (!decay_in_pass_) decay_whole_parameters(step);
  }

  /// `updates`: the region's blocks, (grid_rows, grid_cols, block_rows, block_cols).
  void add_region(const StepWrite& step, const blocking::BlockRegion& region, const at::Tensor& updates) {
    const auto& matrix = views_.of(step.params[region.param], step.plan, region.param);
    pending_.push_back({blocking::region_in_matrix(matrix, region), updates, scale(step, region.param)});
  }

  /// `updates`: blocks `blocks` (ascending) of gradient stack `stack`, (blocks.size(), rows, cols).
  void add_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks, const at::Tensor& updates) {
    for (const auto& piece : blocking::regions_of_blocks(step.plan.gradient_stacks[stack].regions, blocks)) {
      add_region(step, piece, blocking::region_in_stack(updates, piece));
    }
  }

  /// `update`: the whole parameter's, of its shape.
  void add_parameter(const StepWrite& step, int64_t param, const at::Tensor& update) {
    pending_.push_back({step.params[param], update, scale(step, param)});
  }

  void flush(PhaseProfile& profile) {
    ScopedPhase phase(profile, Phase::Copies);
    kernels::transfer_matrices(pending_, kernels::Transfer::Subtract);
    pending_.clear();
  }

  void finish(const StepWrite& step, PhaseProfile& profile) {
    flush(profile);
    ScopedPhase phase(profile, Phase::Copies);
    views_.write_back(step.params);
    views_ = MatrixViews(0);
  }

 private:
  double scale(const StepWrite& step, int64_t param) const { return decay_in_pass_ ? step.decay[param] : 1.0; }

  MatrixViews views_{0};
  std::vector<kernels::ViewPair> pending_;
  bool decay_in_pass_ = true;
};

// The AdamW parameters of `plan` that take a step: calls visit(segment, param).
template <typename Visit>
void for_each_adamw_parameter(const StepWrite& step, const blocking::StackPlan& plan, Visit&& visit) {
  for (size_t j = 0; j < plan.adamw_segments.size(); ++j) {
    for (auto i : plan.adamw_segments[j].params) {
      if (step.has_grad[i] && plan.parameters[i].numel > 0) visit(j, i);
    }
  }
}

// The AdamW updates of the parameters this process computes (one after another in
// `adamw_update`, segment j from segment_offsets[j]) into those parameters, and the
// end of `writer`'s step: every update this process computed is then in place.
void finish_locally(ParameterWriter& writer, const StepWrite& step, const at::Tensor& adamw_update,
    const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) {
  for_each_adamw_parameter(step, step.plan, [&](size_t j, int64_t i) {
    const auto& slot = step.plan.parameters[i];
    writer.add_parameter(step, i,
        adamw_update.narrow(0, segment_offsets[j] + slot.offset - step.plan.adamw_segments[j].offset, slot.numel)
            .view(step.params[i].sizes()));
  });
  writer.finish(step, profile);
}

// One process: every block's update straight into its parameter.
class LocalDistributor final : public Distributor {
 public:
  /// `ranks`: the ranks of DistributionScheme::LocalShards, each with parameters of
  /// its own, which decide alike; null in one process.
  explicit LocalDistributor(const DistributedContext* ranks = nullptr) : ranks_(ranks) {}

  // Ranks of LocalShards go on together: a rank without gradients (an empty shard)
  // still takes part in the decision's all-reduce.
  bool receive_gradients(
      const std::vector<at::Tensor>&, std::vector<at::Tensor>&, std::vector<bool>& has_grad, PhaseProfile&) override {
    return ranks_ != nullptr || std::find(has_grad.begin(), has_grad.end(), true) != has_grad.end();
  }
  void take_maximum_over_ranks(at::Tensor& values) override {
    if (ranks_ != nullptr) distributed::take_maximum_over_ranks(*ranks_, values);
  }
  void bound_workspace(int64_t) override {}
  int64_t communicated_bytes_per_step() const override { return 0; }
  int64_t workspace_bytes() const override { return 0; }

  void begin_updates(const StepWrite& step) override { writer_.begin(step); }

  void write_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks, const at::Tensor& updates,
      PhaseProfile& profile) override {
    ScopedPhase phase(profile, Phase::Copies);
    writer_.add_blocks(step, stack, blocks, updates);
  }

  void flush_updates(PhaseProfile& profile) override { writer_.flush(profile); }

  void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) override {
    finish_locally(writer_, step, adamw_update, segment_offsets, profile);
  }

 private:
  const DistributedContext* ranks_;
  ParameterWriter writer_;
};

// A rank of several: its updates go into its share (distributed/share_layout.h),
// all-gathers bring every rank's, and every rank updates every parameter from them
// as one process would, rank by rank through each rank's plan. Under Zero the
// ranks' gradients are first averaged into the shares of the ranks that own them.
// Within a workspace bound both travel in rounds (ShareRounds), each round's
// buffers written back before the next.
class ExchangeDistributor final : public Distributor {
 public:
  ExchangeDistributor(const DistributedContext& context, blocking::StackPlan& plan,
      const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options, bool float32_parameters)
      : context_(context),
        zero_(context.options().scheme() == DistributionScheme::Zero),
        sends_parameters_(float32_parameters && context.options().communication_dtype() == CommunicationDtype::FP32),
        device_(options.device()) {
    const auto split = distributed::split_work(plan, context.world_size());
    for (int64_t rank = 0; rank < context.world_size(); ++rank) {
      rank_plans_.push_back(distributed::plan_for_rank(plan, split, rank, blocking));
      layouts_.push_back(distributed::share_layout(rank_plans_.back()));
    }
    exchange_ = std::make_unique<distributed::ShareExchange>(
        context, layouts_[context.rank()].numel, zero_, options.device(), !sends_parameters_);
    use_bound(0);
    plan = rank_plans_[context.rank()];
  }

  // Replicated ranks go on together (a rank without gradients still takes part in
  // the collectives) and agree with the step's decision; Zero ranks agree now, in a
  // collective of their own read on the host, as the averaging needs the outcome.
  bool receive_gradients(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& gradients,
      std::vector<bool>& has_grad, PhaseProfile& profile) override {
    agreement_ = Agreement{&params, &gradients, has_grad};
    if (!zero_) return true;
    {
      ScopedPhase phase(profile, Phase::Communication);
      agree(nullptr, has_grad);
    }
    average_gradients(gradients, has_grad, profile);
    return std::find(has_grad.begin(), has_grad.end(), true) != has_grad.end();
  }

  // The step's first call carries a pending agreement: one all-reduce for both, read
  // back at once (the decision is read back right after anyway).
  void take_maximum_over_ranks(at::Tensor& values) override {
    if (!agreement_) {
      distributed::take_maximum_over_ranks(context_, values);
      return;
    }
    std::vector<bool> has_grad = agreement_->has_grad;
    values.copy_(agree(&values, has_grad).view(values.sizes()));
  }

  // Taken up by the next agreement: the ranks' budgets differ with their state, and
  // their rounds must not.
  void bound_workspace(int64_t bytes) override { requested_bound_ = bytes; }

  int64_t communicated_bytes_per_step() const override {
    return static_cast<int64_t>(rounds_.ranges.size()) * exchange_->bytes_per_round();
  }
  int64_t workspace_bytes() const override {
    return exchange_->buffer_bytes() + (agreement_on_device_.defined() ? agreement_on_device_.nbytes() : 0);
  }

  void begin_updates(const StepWrite& step) override {
    pending_.clear();
    if (sends_parameters_) writer_.begin(step);
  }

  // Each run of consecutive blocks is one slice of the share; or, sending parameters,
  // the blocks' updates go into this rank's parameters as in one process.
  void write_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks, const at::Tensor& updates,
      PhaseProfile& profile) override {
    ScopedPhase phase(profile, Phase::Copies);
    if (sends_parameters_) {
      writer_.add_blocks(step, stack, blocks, updates);
      return;
    }
    const auto share =
        distributed::stack_in_share(exchange_->own_updates(), layouts_[context_.rank()], step.plan, stack);
    for (const auto& run : consecutive_runs(blocks)) {
      pending_.push_back({share.narrow(0, run.block, run.length), updates.narrow(0, run.position, run.length)});
    }
  }

  void flush_updates(PhaseProfile& profile) override {
    if (sends_parameters_) {
      writer_.flush(profile);
      return;
    }
    ScopedPhase phase(profile, Phase::Copies);
    kernels::transfer_matrices(pending_, kernels::Transfer::Copy);
    pending_.clear();
  }

  void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) override {
    if (sends_parameters_) {
      finish_by_parameters(step, adamw_update, segment_offsets, profile);
      return;
    }
    const auto& own = layouts_[context_.rank()];
    for (size_t j = 0; j < step.plan.adamw_segments.size(); ++j) {
      const auto numel = step.plan.adamw_segments[j].numel;
      pending_.push_back({exchange_->own_updates().narrow(0, own.segment_offsets[j], numel),
          adamw_update.narrow(0, segment_offsets[j], numel)});
    }
    flush_updates(profile);
    for (size_t k = 0; k < rounds_.ranges.size(); ++k) {
      {
        ScopedPhase phase(profile, Phase::Communication);
        const auto [begin, end] = rounds_.ranges[k][context_.rank()];
        exchange_->all_gather_updates(begin, end);
      }
      if (k == 0) writer_.begin(step);
      for (int64_t rank = 0; rank < context_.world_size(); ++rank) {
        for_each_piece(
            rank, k, exchange_->updates_of(rank), step.has_grad,
            [&](const blocking::BlockRegion& region, const at::Tensor& updates) {
              writer_.add_region(step, region, updates);
            },
            [&](int64_t param, const at::Tensor& update) {
              writer_.add_parameter(step, param, update.view(step.params[param].sizes()));
            });
      }
      writer_.flush(profile);  // before the next round overwrites the buffers
    }
    writer_.finish(step, profile);
  }

 private:
  // Which parameters take a step, decided alike on every rank, and the smallest
  // workspace bound of all ranks, which sets the rounds of this step's exchanges:
  // the mask, its negation (max and −min: replicated gradients must agree, and a
  // parameter some rank lacks is an error there) and −bound (none as −FLT_MAX), for
  // one all-reduce (distributed::take_maximum_over_ranks).
  struct Agreement {
    const std::vector<at::Tensor>* params;
    std::vector<at::Tensor>* gradients;
    std::vector<bool> has_grad;
  };
  static constexpr float kNoBound = -std::numeric_limits<float>::max();

  // One all-reduce of the caller's `leading` values (none: null) followed by this
  // step's agreement, in buffers kept across steps (nothing allocated): the host's
  // values go to the device, the maximum comes back, and the agreement is settled.
  // Returns the leading values' maximum, on the device. The host buffer is pinned
  // beside a CUDA device, so its copy there need not wait; the read back below
  // finishes that copy before a later step writes the buffer again.
  at::Tensor agree(const at::Tensor* leading, std::vector<bool>& has_grad) {
    const int64_t count = leading != nullptr ? leading->numel() : 0;
    const auto params = static_cast<int64_t>(agreement_->has_grad.size());
    const int64_t total = count + 2 * params + 1;
    if (!agreement_on_device_.defined() || agreement_on_device_.numel() != total) {
      agreement_on_device_ = at::empty({total}, at::TensorOptions(device_).dtype(at::kFloat));
      agreement_on_host_ = at::empty({total}, at::TensorOptions().dtype(at::kFloat).pinned_memory(device_.is_cuda()));
    }
    auto* values = agreement_on_host_.data_ptr<float>() + count;
    for (int64_t i = 0; i < params; ++i) {
      const bool has = agreement_->has_grad[static_cast<size_t>(i)];
      values[i] = has ? 1.0f : 0.0f;
      values[params + i] = has ? -1.0f : 0.0f;
    }
    values[2 * params] = requested_bound_ > 0 ? -static_cast<float>(requested_bound_) : kNoBound;
    agreement_on_device_.narrow(0, count, total - count)
        .copy_(agreement_on_host_.narrow(0, count, total - count), /*non_blocking=*/true);
    if (leading != nullptr) agreement_on_device_.narrow(0, 0, count).copy_(leading->reshape(-1));
    distributed::take_maximum_over_ranks(context_, agreement_on_device_);
    agreement_on_host_.copy_(agreement_on_device_);
    settle(agreement_on_host_.narrow(0, count, total - count), has_grad);
    return agreement_on_device_.narrow(0, 0, count);
  }

  // Applies the agreed values (on the host): under Zero a parameter some rank has a
  // gradient for takes a step, from a zero gradient where a rank has none (as DDP
  // counts unused parameters).
  void settle(const at::Tensor& agreed, std::vector<bool>& has_grad) {
    const auto& params = *agreement_->params;
    auto& gradients = *agreement_->gradients;
    const auto* values = agreed.data_ptr<float>();
    const auto count = has_grad.size();
    agreement_.reset();  // (params and gradients stay valid: the engine's and the step's)
    for (size_t i = 0; i < count; ++i) {
      const bool some = values[i] > 0.0f;
      const bool all = values[count + i] < 0.0f;
      TORCH_CHECK(zero_ || some == all, "dash::Dash: rank ", context_.rank(), " of ", context_.world_size(),
          ": parameter ", i, " of shape ", params[i].sizes(), " has a gradient on some ranks and not on others; with ",
          "the replicated scheme every rank must hold the same (all-reduced) gradients (DDP does that), or use the ",
          "zero scheme, which averages each rank's own");
      if (some && !has_grad[i] && params[i].numel() > 0) gradients[i] = at::zeros_like(params[i]);
      has_grad[i] = some;
    }
    const float bound = values[2 * count];
    use_bound(bound == kNoBound ? 0 : static_cast<int64_t>(-bound));
  }

  // Rounds whose buffers fit `bytes` (0: one round). Per element of a round: the
  // all-gather's send and receive buffers, and with gradients the all-to-all's
  // output (its input and the average reuse those where the updates are float32;
  // 16-bit updates take less than the 4 bytes counted).
  void use_bound(int64_t bytes) {
    if (rounds_.numel > 0 && bytes == bound_) return;
    bound_ = bytes;
    const int64_t world = context_.world_size();
    const int64_t per_element = 4 * (1 + world + (zero_ ? world : 0));
    rounds_ =
        distributed::share_rounds(rank_plans_, layouts_, bytes == 0 ? 0 : std::max<int64_t>(1, bytes / per_element));
    exchange_->set_round_numel(rounds_.numel);
  }

  // Float32 parameters and exchange: this rank's blocks and AdamW parameters are
  // updated in place, as in one process, and each round all-gathers the new values of
  // every rank's range, which the other ranks copy into their parameters. No share of
  // the updates is kept (the values are exact in float32, bfloat16 parameters too).
  void finish_by_parameters(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) {
    finish_locally(writer_, step, adamw_update, segment_offsets, profile);
    MatrixViews matrices(step.params.size());
    auto pieces = [&](int64_t rank, size_t k, const at::Tensor& buffer, bool into_parameters) {
      std::vector<kernels::ViewPair> pairs;
      const auto& plan = rank_plans_[rank];
      for_each_piece(
          rank, k, buffer, step.has_grad,
          [&](const blocking::BlockRegion& region, const at::Tensor& values) {
            auto parameter =
                blocking::region_in_matrix(matrices.of(step.params[region.param], plan, region.param), region);
            pairs.push_back(
                into_parameters ? kernels::ViewPair{parameter, values} : kernels::ViewPair{values, parameter});
          },
          [&](int64_t param, const at::Tensor& values) {
            const auto parameter = step.params[param].view(-1);
            pairs.push_back(
                into_parameters ? kernels::ViewPair{parameter, values} : kernels::ViewPair{values, parameter});
          });
      kernels::transfer_matrices(pairs, kernels::Transfer::Copy);
    };
    for (size_t k = 0; k < rounds_.ranges.size(); ++k) {
      {
        ScopedPhase phase(profile, Phase::Copies);
        pieces(context_.rank(), k, exchange_->send_buffer(), false);
      }
      {
        ScopedPhase phase(profile, Phase::Communication);
        exchange_->all_gather_round();
      }
      ScopedPhase phase(profile, Phase::Copies);
      for (int64_t rank = 0; rank < context_.world_size(); ++rank) {
        if (rank != context_.rank()) pieces(rank, k, exchange_->updates_of(rank), true);
      }
    }
    ScopedPhase phase(profile, Phase::Copies);
    matrices.write_back(step.params);
  }

  // Round by round: every rank's gradients of every rank's range into the
  // contributions, one all-to-all, and the average of this rank's range written
  // back into its gradients.
  void average_gradients(
      const std::vector<at::Tensor>& grads, const std::vector<bool>& has_grad, PhaseProfile& profile) {
    MatrixViews matrices(grads.size());
    auto view_of = [&](int64_t param, const blocking::StackPlan& plan) -> const at::Tensor& {
      return matrices.of(grads[param], plan, param);
    };
    for (size_t k = 0; k < rounds_.ranges.size(); ++k) {
      std::vector<kernels::ViewPair> pairs;
      {
        ScopedPhase phase(profile, Phase::Copies);
        for (int64_t rank = 0; rank < context_.world_size(); ++rank) {
          const auto& plan = rank_plans_[rank];
          for_each_piece(
              rank, k, exchange_->gradient_contributions()[rank], has_grad,
              [&](const blocking::BlockRegion& region, const at::Tensor& blocks) {
                pairs.push_back({blocks, blocking::region_in_matrix(view_of(region.param, plan), region)});
              },
              [&](int64_t param, const at::Tensor& part) {
                pairs.push_back({part.view(grads[param].sizes()), grads[param]});
              });
        }
        kernels::transfer_matrices(pairs, kernels::Transfer::Copy);
        pairs.clear();
      }
      at::Tensor average;
      {
        ScopedPhase phase(profile, Phase::Communication);
        average = exchange_->average_gradients();
      }
      ScopedPhase phase(profile, Phase::Copies);
      const auto& plan = rank_plans_[context_.rank()];
      for_each_piece(
          context_.rank(), k, average, has_grad,
          [&](const blocking::BlockRegion& region, const at::Tensor& blocks) {
            pairs.push_back({blocking::region_in_matrix(view_of(region.param, plan), region), blocks});
          },
          [&](int64_t param, const at::Tensor& part) {
            pairs.push_back({grads[param], part.view(grads[param].sizes())});
          });
      kernels::transfer_matrices(pairs, kernels::Transfer::Copy);
    }
    matrices.write_back(grads);
  }

  // The pieces of rank `rank`'s range of round k whose parameters take a step, in
  // `buffer` (that range's elements from its start): visit_region(region, blocks)
  // for each block region, with its blocks' (grid_rows, grid_cols, rows, cols)
  // view, and visit_parameter(param, part) for each AdamW parameter (flat).
  template <typename VisitRegion, typename VisitParameter>
  void for_each_piece(int64_t rank, size_t k, const at::Tensor& buffer, const std::vector<bool>& has_grad,
      VisitRegion&& visit_region, VisitParameter&& visit_parameter) const {
    const auto& plan = rank_plans_[rank];
    const auto [begin, end] = rounds_.ranges[k][rank];
    for (const auto& piece : distributed::pieces_in(plan, layouts_[rank], begin, end)) {
      const auto part = buffer.narrow(0, piece.offset - begin, piece.numel);
      if (piece.param >= 0) {
        if (has_grad[piece.param]) visit_parameter(piece.param, part);
        continue;
      }
      const auto& stack = plan.gradient_stacks[piece.stack];
      const auto blocks = part.view({piece.blocks, stack.rows, stack.cols});
      std::vector<int64_t> numbers(static_cast<size_t>(piece.blocks));
      std::iota(numbers.begin(), numbers.end(), piece.first_block);
      for (const auto& region : blocking::regions_of_blocks(stack.regions, numbers)) {
        if (has_grad[region.param]) visit_region(region, blocking::region_in_stack(blocks, region));
      }
    }
  }

  const DistributedContext& context_;
  bool zero_ = false;
  bool sends_parameters_ = false;  ///< the parameters' new values, rather than the updates
  at::Device device_;
  std::vector<blocking::StackPlan> rank_plans_;  ///< every rank's blocks, to read its share
  std::vector<distributed::ShareLayout> layouts_;
  std::unique_ptr<distributed::ShareExchange> exchange_;
  distributed::ShareRounds rounds_;
  int64_t bound_ = 0;                   ///< the bound rounds_ were made for, agreed by all ranks
  int64_t requested_bound_ = 0;         ///< this rank's, for the next agreement
  std::optional<Agreement> agreement_;  ///< this step's, until settled
  at::Tensor agreement_on_host_;        ///< agree()'s buffers, kept across steps
  at::Tensor agreement_on_device_;
  std::vector<kernels::ViewPair> pending_;  ///< updates into this rank's share, until the next flush
  ParameterWriter writer_;
};

}  // namespace

bool splits_blocks(const DistributedContext* context) {
  return context != nullptr && context->world_size() > 1 &&
         context->options().scheme() != DistributionScheme::LocalShards;
}

std::unique_ptr<Distributor> make_distributor(const DistributedContext* context, blocking::StackPlan& plan,
    const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options, bool float32_parameters) {
  if (splits_blocks(context)) {
    return std::make_unique<ExchangeDistributor>(*context, plan, blocking, options, float32_parameters);
  }
  const bool ranks = context != nullptr && context->world_size() > 1;
  return std::make_unique<LocalDistributor>(ranks ? context : nullptr);
}

}  // namespace dash::optim
