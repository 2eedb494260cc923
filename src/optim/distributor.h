#pragma once

// Who computes which blocks, and how every parameter receives its update: the role
// of Distributed Shampoo's DistributorInterface. In one process the engine computes
// every block and writes the updates straight into the parameters; a rank of a
// distributed optimizer computes its share of the blocks (distributed/work_split.h)
// and all-gathers the others' updates (distributed/update_exchange.h). The engine
// runs the same step either way. To add a scheme: a class in distributor.cpp and
// its case in make_distributor().

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

  /// Whether this process computes every block. When not, what all processes must
  /// decide alike (is every gradient finite?) is read from the parameters' gradients.
  virtual bool computes_every_block() const = 0;

  /// Bytes this process sends plus receives per step.
  virtual int64_t communicated_bytes_per_step() const = 0;

  /// Bytes the scheme keeps across steps (an exchange buffer), for the workspace count.
  virtual int64_t workspace_bytes() const = 0;

  /// Starts a step's updates: before its first write_blocks().
  virtual void begin_updates(const StepWrite& step) = 0;

  /// lr·P of the blocks `blocks` (ascending) of gradient stack `stack`, as
  /// (blocks.size(), rows, cols). Taken by reference: `updates` must hold them
  /// until the next flush_updates() or finish_updates(), which write them where
  /// they go (W ← W·decay − lr·P in one process, the product rounded before the
  /// difference; the exchange buffer on a rank of several).
  virtual void write_blocks(const StepWrite& step, size_t stack, const std::vector<int64_t>& blocks,
      const at::Tensor& updates, PhaseProfile& profile) = 0;

  /// Writes every update taken since the last flush.
  virtual void flush_updates(PhaseProfile& profile) = 0;

  /// Ends the step: the AdamW segments' updates (one after another in
  /// `adamw_update`, segment j from segment_offsets[j]) and what the scheme does once
  /// every block is in (a rank of several all-gathers, then updates every
  /// parameter; no parameter changes before the collective has succeeded).
  virtual void finish_updates(const StepWrite& step, const at::Tensor& adamw_update,
      const std::vector<int64_t>& segment_offsets, PhaseProfile& profile) = 0;
};

/// The distributor for `context` (null or a single rank: one process). Replaces
/// `plan` by the blocks this process computes; `blocking` are the groups' settings.
std::unique_ptr<Distributor> make_distributor(const DistributedContext* context, blocking::StackPlan& plan,
    const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options);

}  // namespace dash::optim
