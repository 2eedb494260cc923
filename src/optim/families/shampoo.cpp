#include "optim/families/shampoo.h"

#include "linalg/batched_matmul.h"
#include "optim/dash_options.h"
#include "optim/families/shampoo_arithmetic.h"
#include "optim/families/shampoo_roots.h"
#include "optim/families/shampoo_state.h"
#include "optim/rows.h"
#include "optim/saved_entries.h"
#include "optim/state_precision.h"
#include "optim/step_context.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace dash::optim {
namespace {

constexpr const char* kSides[] = {"left", "right"};

bool root_due(int64_t step, const DashOptions& options) {
  return step >= options.start_step() && (step - options.start_step()) % options.root_frequency() == 0;
}

// Whether a factor stack of a group with `options` may keep a warm eigenbasis
// (RootMethod::Auto may choose EVD): its entries then show the eigenbasis fields
// from the start, as the zeros they will be allocated as, since
// torch.distributed.checkpoint loads only the names its target, a fresh
// optimizer's state dict, already holds.
bool may_warm_start(const DashOptions& options) {
  const auto method = options.root().method();
  return options.root().eigen().refresh_tolerance() > 0.0 && (method == RootMethod::EVD || method == RootMethod::Auto);
}

// A block's factor rows, (factor stack, offset of the stack's block 0) per side:
// left, then right unless one-sided.
std::vector<std::pair<size_t, int64_t>> factor_sides(const blocking::GradientStack& stack) {
  std::vector<std::pair<size_t, int64_t>> sides{{static_cast<size_t>(stack.left_stack), stack.left_offset}};
  if (!stack.one_sided) sides.emplace_back(static_cast<size_t>(stack.right_stack), stack.right_offset);
  return sides;
}

class Shampoo final : public Preconditioner {
 public:
  Shampoo(const blocking::StackPlan& plan, const std::vector<torch::optim::OptimizerParamGroup>& groups,
      const at::TensorOptions& to)
      : plan_(plan), resets_total_(at::zeros({}, to.dtype(at::kLong))) {
    for (const auto& stack : plan.factor_stacks) {
      const auto& options = options_of(groups[stack.group]);
      const bool served = options.preconditioner() == PreconditionerType::Shampoo;
      factors_.push_back(
          served ? zero_factor_stack(stack.count, stack.size, options, to.device()) : FactorStackState{});
    }
    loaded_choices_.resize(factors_.size());
  }

  void block_entries(
      size_t s, int64_t i, const std::string& prefix, const DashOptions& options, ParameterState& out) const override {
    const auto sides = factor_sides(plan_.gradient_stacks[s]);
    for (size_t side = 0; side < sides.size(); ++side) {
      const auto& factor = factors_[sides[side].first];
      const auto row = sides[side].second + i;
      const std::string suffix = std::string("_") + kSides[side];
      for (const auto& field : factor_fields) {
        const bool shown =
            field.presence != FactorPresence::WarmStart || (factor.*field.tensor).defined() || may_warm_start(options);
        if (shown) out.emplace_back(prefix + field.name + suffix, factor_row(factor, field, row));
      }
      out.emplace_back(prefix + "root_choice" + suffix,
          at::tensor(
              {static_cast<int64_t>(factor.root_execution), static_cast<int64_t>(factor.root_method)}, at::kLong));
    }
  }

  bool is_block_field(const std::string& field) const override {
    for (const char* side : kSides) {
      const auto suffix = std::string("_") + side;
      if (field == "root_choice" + suffix) return true;
      for (const auto& entry : factor_fields) {
        if (field == entry.name + suffix) return true;
      }
    }
    return false;
  }

  void load_block_entries(
      size_t s, int64_t i, size_t param, const std::string& prefix, const SavedEntries& saved) override {
    const auto sides = factor_sides(plan_.gradient_stacks[s]);
    for (size_t side = 0; side < sides.size(); ++side) {
      const auto k = sides[side].first;
      const auto name = [&](const char* field) { return prefix + field + "_" + kSides[side]; };
      load_factor_row(factors_[k], sides[side].second + i, param, saved, name);
      const auto choice = saved.find(param, name("root_choice"));
      TORCH_CHECK(!choice.defined() || choice.numel() == 2,
          "dash::Dash: ", SavedEntries::what(param, name("root_choice")), " must hold 2 numbers");
      const auto values = choice.defined() ? choice.to(at::kCPU, at::kLong) : at::full({2}, -1, at::kLong);
      loaded_choices_[k].first.insert(values[0].item<int64_t>());
      loaded_choices_[k].second.insert(values[1].item<int64_t>());
    }
  }

  // Execution::Auto's and RootMethod::Auto's choices are kept where all the rows'
  // sources made the same one (−1: none saved), else made again.
  void finish_loading() override {
    for (size_t k = 0; k < factors_.size(); ++k) {
      const auto& [executions, methods] = loaded_choices_[k];
      for (const auto value : executions) {
        TORCH_CHECK(value >= -1 && value <= static_cast<int64_t>(Execution::Auto),
            "dash::Dash: corrupt checkpoint (root execution ", value, ")");
      }
      for (const auto value : methods) {
        TORCH_CHECK(value >= -1 && value <= static_cast<int64_t>(RootMethod::Auto),
            "dash::Dash: corrupt checkpoint (root method ", value, ")");
      }
      auto& state = factors_[k];
      if (executions.size() == 1 && *executions.begin() >= 0) {
        state.root_execution = static_cast<Execution>(*executions.begin());
        state.calibration_pending = state.root_execution == Execution::Auto;
      }
      if (methods.size() == 1 && *methods.begin() >= 0) state.root_method = static_cast<RootMethod>(*methods.begin());
    }
    loaded_choices_.assign(factors_.size(), {});
  }

  void for_each_state_tensor(const std::function<void(const at::Tensor&)>& visit) const override {
    for (const auto& factor : factors_) {
      for (const auto& field : factor_fields) visit(factor.*field.tensor);
      for (const auto& counter : factor_stack_counters) visit(factor.*counter.first);
    }
  }

  void convert_precision(const StepContext& context) override {
    for (size_t k = 0; k < factors_.size(); ++k) {
      if (!serves(k)) continue;
      const auto& options = context.options(plan_.factor_stacks[k].group);
      if (options.factor_precision() == MatmulPrecision::BF16) {
        TORCH_WARN_ONCE(
            "dash::Dash: factor_precision bf16 keeps 8 significant bits of the factors, which loses their small "
            "eigenvalues: in dash-train's comparison training ended 0.06 (EVD) to 0.62 (NewtonDB, most of whose "
            "roots failed) nats/byte worse than with fp32 factors (docs/results.md, \"16-bit optimizer state\"); "
            "bf16 roots and moments trained as fp32 state");
      }
      if (convert_factor_stack(factors_[k], options)) {
        factors_[k].root_operands = at::Tensor();
        factors_[k].root_operands_current = false;
      }
    }
  }

  void adopt(Preconditioner& previous) override {
    auto& old = dynamic_cast<Shampoo&>(previous);
    TORCH_INTERNAL_ASSERT(old.factors_.size() <= factors_.size());
    std::move(old.factors_.begin(), old.factors_.end(), factors_.begin());
    resets_total_ = old.resets_total_;
  }

  bool keeps_statistics() const override { return true; }

  void update_statistics(
      StepContext& context, size_t s, const Rows& rows, const at::Tensor& grad, FamilyBuffers& buffers) override {
    const auto& stack = plan_.gradient_stacks[s];
    const double beta = context.options(stack.group).beta_factor();
    const auto sides = factor_sides(stack);
    for (size_t side = 0; side < sides.size(); ++side) {
      auto segment = factors_[sides[side].first].factors.narrow(0, sides[side].second, stack.count());
      auto part = rows.take(segment, buffers.subset);
      auto computed = widened(part, buffers.blocks);
      accumulate_factor(computed, grad, /*left=*/side == 0, beta);
      store_rounded(part, computed);
      rows.put(segment, part);
    }
  }

  void refresh(StepContext& context, FamilyBuffers& buffers) override {
    for (size_t k = 0; k < factors_.size(); ++k) {
      if (serves(k)) refresh_stack(context, k, buffers);
    }
  }

  at::Tensor direction(
      StepContext& context, size_t s, const Rows& rows, Workspace& work, FamilyBuffers& buffers) override {
    const auto& stack = plan_.gradient_stacks[s];
    const auto precision = context.options(stack.group).preconditioning_precision();
    auto root_part = [&](int64_t k, int64_t offset) {
      return k < 0 ? at::Tensor()
                   : preconditioning_roots(
                         context, static_cast<size_t>(k), offset, stack.count(), rows, precision, buffers);
    };
    const auto left = root_part(stack.left_stack, stack.left_offset);
    const auto right = root_part(stack.right_stack, stack.right_offset);
    return shampoo_direction(work, left, right);
  }

  // Each block's factors (and their roots) once more: bfloat16 factors widened for
  // the update, a 16-bit preconditioning's rounded roots, a scattered chunk's copies.
  ChunkBytes chunk_bytes_per_block(
      const blocking::GradientStack& stack, const DashOptions& options, bool stack_complete) const override {
    const int64_t factors = 4 * (stack.rows * stack.rows + (stack.one_sided ? 0 : stack.cols * stack.cols));
    const auto operand_dtype = linalg::operand_dtype(options.preconditioning_precision(), at::kFloat);
    ChunkBytes bytes;
    if (operand_dtype != state_dtype(options.root_precision())) {
      bytes.direction += factors * static_cast<int64_t>(c10::elementSize(operand_dtype)) / 4;
    }
    if (options.factor_precision() != MatmulPrecision::FP32) bytes.statistics += factors;
    if (!stack_complete) {
      bytes.direction += factors;
      bytes.statistics += factors;
    }
    return bytes;
  }

  void diagnose(const std::vector<torch::optim::OptimizerParamGroup>& groups, DashDiagnostics& result) const override {
    for (size_t k = 0; k < factors_.size(); ++k) {
      if (!serves(k)) continue;
      const auto& stack = plan_.factor_stacks[k];
      const auto& state = factors_[k];
      const auto& options = options_of(groups[stack.group]);
      result.factor_stacks.push_back({stack.group, stack.size, stack.count, stack.root, state.failures.item<int64_t>(),
          options.execution() == Execution::Auto ? state.root_execution : options.execution(),
          state.calibrated_batched_ms, state.calibrated_per_block_ms});
      auto& entry = result.factor_stacks.back();
      if (state.refresh_counts.defined()) {
        const auto counts = state.refresh_counts.cpu();
        entry.roots_kept = counts[0].item<int64_t>();
        entry.roots_warm_started = counts[1].item<int64_t>();
        entry.roots_recomputed = counts[2].item<int64_t>();
      }
      if (state.factor_resets.defined()) entry.factor_resets = state.factor_resets.item<int64_t>();
      const bool auto_method = options.root().method() == RootMethod::Auto;
      entry.root_method = auto_method ? state.root_method : options.root().method();
      if (auto_method) entry.root_method_trials = state.root_method_trials;
      entry.newton_db_evaluation = resolve_newton_db_evaluation(options.root(), state.factors.device());
    }
  }

  int64_t workspace_bytes() const override {
    int64_t bytes = 0;
    for (const auto& factor : factors_) {
      if (factor.root_operands.defined()) bytes += static_cast<int64_t>(factor.root_operands.nbytes());
    }
    return bytes;
  }

  void failure_records(
      const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<FailureRecord>& out) const override {
    for (size_t k = 0; k < factors_.size(); ++k) {
      if (!serves(k)) continue;
      const auto& stack = plan_.factor_stacks[k];
      const auto method = options_of(groups[stack.group]).root().method();
      out.push_back({stack.group, factors_[k].consecutive_failures,
          [k, stack] {
            return "an inverse root in factor stack " + std::to_string(k) + " (parameter group " +
                   std::to_string(stack.group) + ", " + std::to_string(stack.count) + " factors of " +
                   std::to_string(stack.size) + "×" + std::to_string(stack.size) + ")";
          },
          [method] {
            return std::string(method == RootMethod::EVD
                                   ? "a larger root epsilon usually helps"
                                   : "a larger root epsilon, float32 precision or the EVD root method usually helps");
          }});
    }
  }

  const at::Tensor& resets_total() const override { return resets_total_; }

 private:
  bool serves(size_t k) const { return factors_[k].factors.defined(); }

  // One factor's rows of every field from `saved`: the Kept fields are required,
  // the others optional (zeros where a state saved before they existed lacks them),
  // each presence's fields given together or not at all.
  template <typename Name>
  void load_factor_row(FactorStackState& factor, int64_t row, size_t param, const SavedEntries& saved, Name&& name) {
    for (const auto presence : {FactorPresence::FirstRoot, FactorPresence::WarmStart}) {
      std::vector<std::string> given, missing;
      for (const auto& field : factor_fields) {
        if (field.presence == presence)
          (saved.find(param, name(field.name)).defined() ? given : missing).push_back(name(field.name));
      }
      TORCH_CHECK(given.empty() || missing.empty(), "dash::Dash: parameter ", param, "'s state has '", given.front(),
          "' but not '", missing.empty() ? "" : missing.front(), "': one is never saved without the other");
    }
    for (const auto& field : factor_fields) {
      const auto entry = name(field.name);
      const auto value =
          field.presence == FactorPresence::Kept ? saved.required(param, entry) : saved.find(param, entry);
      if (!value.defined()) continue;
      auto& tensor = factor.*field.tensor;
      if (!tensor.defined()) allocate_factor_fields(factor, field.presence);
      copy_entry(tensor.select(0, row), value, field.values, SavedEntries::what(param, entry));
    }
  }

  // Which factors of stack k are due this step (from the host copy of each block's
  // t), and their new roots by the stack's root policy (shampoo_roots.h).
  void refresh_stack(StepContext& context, size_t k, FamilyBuffers& buffers) {
    const auto& stack = plan_.factor_stacks[k];
    const auto& options = context.options(stack.group);
    std::vector<bool> due(stack.count, false);
    for (size_t s = 0; s < plan_.gradient_stacks.size(); ++s) {
      const auto& gradient_stack = plan_.gradient_stacks[s];
      for (int64_t block : context.active[s]) {
        const bool is_due = root_due((*context.steps)[s][block], options);
        if (gradient_stack.left_stack == static_cast<int64_t>(k)) due[gradient_stack.left_offset + block] = is_due;
        if (gradient_stack.right_stack == static_cast<int64_t>(k)) due[gradient_stack.right_offset + block] = is_due;
      }
    }
    if (std::none_of(due.begin(), due.end(), [](bool is_due) { return is_due; })) return;
    context.amortised_work_done = true;
    factors_[k].root_operands_current = false;
    ScopedPhase phase(buffers.profile, Phase::Roots);
    RootBuffers root_buffers{buffers.solvers, buffers.blocks, resets_total_};
    refresh_roots(stack, options, context.budget, due, factors_[k], root_buffers);
  }

  // The roots of `rows` (blocks of a gradient stack whose factors are count factors
  // of stack k from `offset`) as operands of the preconditioning products in
  // `precision`: the stored roots themselves where their dtype is the operands'
  // (float32 roots in FP32, bfloat16 roots in BF16). Else float32 roots are rounded
  // to 16 bits (without a workspace limit into a copy of the whole stack made once
  // per root computation, not once per step; within one into the chunk's buffers at
  // every step), and bfloat16 roots widened into the chunk's buffers.
  at::Tensor preconditioning_roots(const StepContext& context, size_t k, int64_t offset, int64_t count,
      const Rows& rows, MatmulPrecision precision, FamilyBuffers& buffers) {
    auto& state = factors_[k];
    // (BF16 is the one 16-bit preconditioning precision: check_options refuses FP16.)
    const auto operand_dtype = linalg::operand_dtype(precision, at::kFloat);
    const bool rounded_copy =
        operand_dtype != at::kFloat && operand_dtype != state.roots.scalar_type() && !context.budget.bounded();
    if (!rounded_copy) {
      state.root_operands = at::Tensor();  // no copy needed now
      state.root_operands_current = false;
      return linalg::in_dtype(
          rows.take(state.roots.narrow(0, offset, count), buffers.subset), operand_dtype, buffers.blocks);
    }
    if (!state.root_operands.defined()) {
      state.root_operands = at::empty_like(state.roots, state.roots.options().dtype(operand_dtype));
    }
    if (!state.root_operands_current) {
      state.root_operands.copy_(state.roots);
      state.root_operands_current = true;
    }
    return rows.take(state.root_operands.narrow(0, offset, count), buffers.subset);
  }

  const blocking::StackPlan& plan_;
  std::vector<FactorStackState> factors_;  ///< per factor stack of the plan (undefined: another family's group)
  at::Tensor resets_total_;                ///< () int64 over all stacks
  /// During a load, per factor stack: the root executions and methods its rows' sources chose.
  std::vector<std::pair<std::set<int64_t>, std::set<int64_t>>> loaded_choices_;
};

}  // namespace

std::unique_ptr<Preconditioner> make_shampoo(const blocking::StackPlan& plan,
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to) {
  return std::make_unique<Shampoo>(plan, groups, to);
}

}  // namespace dash::optim
