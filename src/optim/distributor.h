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

/// A step's updates lr·P as this process computed them.
struct StepUpdates {
  const blocking::StackPlan& plan;               ///< the blocks this process computed
  const std::vector<at::Tensor>& params;         ///< every parameter
  const std::vector<bool>& has_grad;             ///< per parameter: it takes a step
  const std::vector<double>& decay;              ///< per parameter: W's factor 1 − lr·wd, 1 for none
  const std::vector<at::Tensor>& stack_updates;  ///< per gradient stack of `plan`, (count, rows, cols)
  const at::Tensor& adamw_update;                ///< the AdamW segments' updates, one after another
  const std::vector<int64_t>& segment_offsets;   ///< where each segment starts in `adamw_update`
};

class Distributor {
 public:
  virtual ~Distributor() = default;

  /// Whether this process computes every block. When not, what all processes must
  /// decide alike (is every gradient finite?) is read from the parameters' gradients.
  virtual bool computes_every_block() const = 0;

  /// Bytes this process sends plus receives per step.
  virtual int64_t communicated_bytes_per_step() const = 0;

  /// Brings together what this process needs to update every parameter (the other
  /// ranks' updates). Touches no parameter, so a failed collective leaves them as
  /// they were. Nothing to do in one process.
  virtual void gather_updates(const StepUpdates& updates, PhaseProfile& profile) = 0;

  /// W ← W·decay − lr·P for every parameter that takes a step (after
  /// gather_updates()), the product rounded before the difference: the weight decay
  /// and the update, in one pass where the scheme allows.
  virtual void apply_updates(const StepUpdates& updates, PhaseProfile& profile) = 0;
};

/// The distributor for `context` (null or a single rank: one process). Replaces
/// `plan` by the blocks this process computes; `blocking` are the groups' settings.
std::unique_ptr<Distributor> make_distributor(const DistributedContext* context, blocking::StackPlan& plan,
    const std::vector<blocking::GroupBlocking>& blocking, const at::TensorOptions& options);

}  // namespace dash::optim
