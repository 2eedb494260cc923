#pragma once

// Who computes which blocks, where their gradients come from and how every
// parameter receives its update: the role of Distributed Shampoo's
// DistributorInterface, both ends of a step. In one process the engine computes
// every block from the parameters' gradients and the updates go straight into the
// parameters. A rank of a distributed optimizer computes its share of the blocks
// (distributed/work_split.h), under DistributionScheme::Zero from gradients
// averaged over the ranks first, and all-gathers the others' updates
// (distributed/share_exchange.h); under LocalShards it computes every block of its
// own parameters, as one process, deciding alike with the others. The engine runs
// the same step either way. To add
// a scheme: a class in distributor.cpp, its case in make_distributor(), and its
// instance in tests/distributed/test_distributor_contract.cpp.

#include <dash/distributed.h>

#include "blocking/stack_plan.h"
#include "optim/phase_profile.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace dash::optim {

/// Whom a step's updates are for.
struct StepWrite {
  const blocking::StackPlan& plan;        ///< the blocks this process computes
  const std::vector<at::Tensor>& params;  ///< every parameter
  const std::vector<bool>& has_grad;      ///< per parameter: it takes a step
  const std::vector<double>& decay;       ///< per parameter: W's factor 1 − lr·wd, 1 for none
};

class Distributor {
 public:
  virtual ~Distributor() = default;

  // Gradients in.

  /// Makes `gradients` (the step's, one per parameter, undefined where it has none:
  /// the engine's snapshot, never read again from the parameters) what this
  /// process's blocks and segments are to read, before the engine gathers them, and
  /// says whether the step goes on. `has_grad` is this process's view (which parameters have a gradient). In one
  /// process the step goes on when some parameter has one. Under Zero the ranks agree
  /// on `has_grad` first (the averaging needs it) and the gradients of this rank's
  /// blocks and segments become their average over the ranks. Replicated gradients
  /// must agree already: the ranks check that with the step's decision
  /// (take_maximum_over_ranks, which ranks always take), without a collective of
  /// their own, and go on together.
  virtual bool receive_gradients(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& gradients,
      std::vector<bool>& has_grad, PhaseProfile& profile) = 0;

  /// What every process must decide alike, as every process sees it: makes `values`
  /// (contiguous float32 on the parameters' device) their element-wise maximum over
  /// the ranks, NaN counting as +∞ on several ranks; leaves them in one process. The
  /// step's first call also carries what the scheme still has to agree on (the
  /// workspace bound; under Replicated whether every rank has gradients for the same
  /// parameters, an error on every rank if not). Allocates nothing on the device.
  virtual void take_maximum_over_ranks(at::Tensor& values) = 0;

  /// Bounds the buffers the scheme keeps besides this rank's share of the updates by
  /// `bytes` (0: no bound), from the step's workspace budget; a rank of several then
  /// exchanges in rounds that fit the smallest bound of all ranks (agreed before the
  /// step's exchanges: ranks' budgets differ with their state).
  virtual void bound_workspace(int64_t bytes) = 0;

  // Accounting.

  /// Bytes this process sends plus receives per step.
  virtual int64_t communicated_bytes_per_step() const = 0;
  /// Bytes the scheme keeps across steps (exchange buffers), for the workspace count.
  virtual int64_t workspace_bytes() const = 0;

  // Updates out.

  /// Starts a step's updates: before its first write_blocks().
  virtual void begin_updates(const StepWrite& step) = 0;

  /// lr·P of the blocks `blocks` (ascending) of gradient stack `stack`, as
  /// (blocks.size(), rows, cols). Taken by reference: `updates` must hold them
  /// until the next flush_updates() or finish_updates(), which write them where
  /// they go (W ← W·decay − lr·P in one process, the product rounded before the
  /// difference; the exchanged share on a rank of several).
  virtual void write_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks,
      const at::Tensor& updates, PhaseProfile& profile) = 0;

  /// Writes every update taken since the last flush.
  virtual void flush_updates(PhaseProfile& profile) = 0;

  /// Ends the step: the AdamW segments' updates (one after another in
  /// `adamw_update`, segment j from segment_offsets[j]) and what the scheme does once
  /// every block is in (a rank of several all-gathers, so that every parameter ends
  /// as one process leaves it: the new values of the ranks' blocks where they are
  /// exact in float32, which the owning ranks updated in place; else the updates,
  /// and then no parameter changes before the first round's collective has
  /// succeeded, nor in one round before all have).
  virtual void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) = 0;
};

/// Whether the ranks of `context` split one set of blocks between them (Replicated,
/// Zero), rather than each computing every block of parameters of its own
/// (LocalShards, or one process).
bool splits_blocks(const DistributedContext* context);

/// The distributor for `context` (null or a single rank: one process). Replaces
/// `plan` by the blocks this process computes; `blocking` are the groups' settings.
/// `float32_parameters`: every parameter is float32 or bfloat16, so that a float32
/// exchange may carry the parameters' new values exactly (no share of the updates
/// is then kept); else the updates travel.
std::unique_ptr<Distributor> make_distributor(const DistributedContext* context, blocking::StackPlan& plan,
    const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options, bool float32_parameters);

}  // namespace dash::optim
