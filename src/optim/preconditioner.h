#pragma once

// The seam between the engine and a preconditioner family (docs/architecture.md,
// "Where to add a preconditioner family"). The engine does for every family alike
// what is not the family's own arithmetic: blocking into equal-shaped stacks, the
// gradient check, Ĝ (the gradient's bias-corrected EMA) and the grafting direction,
// t_start, the rescale to the grafting norm, momentum, lr and weight decay,
// workspace chunks within workspace_limit, distribution over ranks, the failure
// limit, checkpoints and diagnostics. A family owns the state its statistics and
// their amortised products need, described once in a field table
// (optim/state_fields.h), and three pieces of arithmetic on the chunks of a stack:
//
//   update_statistics  every step, from the chunk's gradient blocks G;
//   refresh            at the steps its amortised work is due (roots, eigenbases),
//                      over its whole state;
//   direction          U from Ĝ, per chunk, for the blocks past t_start.
//
// The engine serves each family the gradient stacks of the groups whose
// DashOptions::preconditioner names it (make_preconditioner, families/registry.h).

#include <dash/optimizer.h>

#include "blocking/stack_plan.h"
#include "kernels/scratch.h"
#include "optim/block_state.h"
#include "optim/failure_limit.h"
#include "optim/phase_profile.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dash::optim {

class Rows;          // optim/rows.h
class SavedEntries;  // optim/saved_entries.h
struct StepContext;  // optim/step_context.h

/// The engine's buffers a family's work may use, kept across steps and shared by
/// every family (one piece of work runs at a time).
struct FamilyBuffers {
  kernels::Scratch& blocks;       ///< the chunk's block buffers
  kernels::Scratch* subset;       ///< where a scattered chunk's copies go (Rows::take; null: temporaries)
  InverseRootWorkspace& solvers;  ///< the amortised work's temporaries (bounded by the roots' share)
  PhaseProfile& profile;
};

/// Bytes per block a chunk's work needs beyond the engine's own, in the phase that
/// updates the statistics and in the one that forms the direction (the workspace
/// limit's chunks count them: optim/gradient_chunk_bytes.h).
struct ChunkBytes {
  int64_t statistics = 0;
  int64_t direction = 0;
};

class Preconditioner {
 public:
  virtual ~Preconditioner() = default;

  // The state, by the family's field table.

  /// Block `block` of gradient stack `stack`'s entries (views of the live state, or
  /// the zeros of fields not allocated yet), each named `prefix` + its field.
  virtual void block_entries(size_t stack, int64_t block, const std::string& prefix, const DashOptions& options,
      ParameterState& out) const = 0;
  /// Whether `field` names one of a block's entries (the names a load accepts).
  virtual bool is_block_field(const std::string& field) const = 0;
  /// Into a fresh family: block `block` of `stack`, parameter `param`'s, from
  /// `saved` (each entry checked by its field's shape, dtype and values).
  virtual void load_block_entries(
      size_t stack, int64_t block, size_t param, const std::string& prefix, const SavedEntries& saved) = 0;
  /// After every block was loaded (the per-stack choices settle).
  virtual void finish_loading() = 0;
  /// Every state tensor (for its bytes); undefined ones included.
  virtual void for_each_state_tensor(const std::function<void(const at::Tensor&)>& visit) const = 0;
  /// The state in the groups' storage precisions now (converted where an option changed).
  virtual void convert_precision(const StepContext& context) = 0;
  /// Takes over the state of `previous`, the same family of an engine for the first
  /// groups of this one's (Engine::adopt_state).
  virtual void adopt(Preconditioner& previous) = 0;

  // The step.

  /// Whether update_statistics does anything: a family without statistics (spectral
  /// descent) spares the engine the pass that serves them the gradient blocks.
  virtual bool keeps_statistics() const = 0;
  /// The statistics of the chunk `rows` of gradient stack `stack` from its gradient
  /// blocks `grad` ((rows, block_rows, block_cols), float32).
  virtual void update_statistics(
      StepContext& context, size_t stack, const Rows& rows, const at::Tensor& grad, FamilyBuffers& buffers) = 0;
  /// The amortised work due this step (context.steps says each block's t), after
  /// every chunk's statistics; sets context.amortised_work_done where some was.
  virtual void refresh(StepContext& context, FamilyBuffers& buffers) = 0;
  /// U for the chunk from Ĝ in work.ghat, into work's buffers (product, direction,
  /// or the 16-bit operands); returns the tensor that holds it. The gradient blocks
  /// in work.product are dead by then (with nesterov_grad they are in work.ghat's).
  virtual at::Tensor direction(
      StepContext& context, size_t stack, const Rows& rows, Workspace& work, FamilyBuffers& buffers) = 0;
  virtual ChunkBytes chunk_bytes_per_block(
      const blocking::GradientStack& stack, const DashOptions& options, bool stack_complete) const = 0;

  // Reports, and the failure policy's inputs.

  virtual void diagnose(
      const std::vector<torch::optim::OptimizerParamGroup>& groups, DashDiagnostics& diagnostics) const = 0;
  /// Bytes kept across steps besides the state (not saved).
  virtual int64_t workspace_bytes() const = 0;
  /// The amortised items that can fail, for the failure limit, appended to `out`.
  virtual void failure_records(
      const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<FailureRecord>& out) const = 0;
  /// () int64 on the device: statistics restarted from zero so far (an overflowed
  /// factor), read with the step's decision; undefined where the family has none.
  virtual const at::Tensor& resets_total() const = 0;
};

}  // namespace dash::optim
