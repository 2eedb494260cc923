#include <dash/distributed.h>
#include <dash/optimizer.h>

#include "optim/dash_options.h"
#include "optim/distributor.h"
#include "optim/engine.h"
#include "optim/legacy_archive.h"
#include "optim/parameter_checks.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <optional>
#include <string>
#include <utility>

namespace dash {

// Dash's private part is the engine itself (src/optim/engine.h).
class Dash::Impl : public optim::Engine {
 public:
  using optim::Engine::Engine;
};

namespace {

// 2: the state keyed by parameter (Dash::parameter_state's entries); 1, written
// until 2026-12-07: by stack, read by optim/legacy_archive.h.
constexpr int64_t kCheckpointFormat = 2;

// Ranks that disagree about the parameters would split different blocks and apply
// each other's updates to the wrong elements; this one collective rules it out.
void check_ranks_agree(
    const DistributedContext* distributed, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  if (distributed == nullptr || distributed->world_size() == 1) return;
  at::Device device = at::kCPU;
  for (const auto& group : groups) {
    if (!group.params().empty()) device = group.params().front().device();
  }
  // The distributed options too: ranks of different schemes or dtypes would run
  // collectives of different kinds or sizes. Ranks of local shards have parameters
  // of their own, whose shapes may differ.
  const auto& options = distributed->options();
  const bool own_parameters = !optim::splits_blocks(distributed);
  distributed->check_same_on_all_ranks(optim::groups_signature(groups, !own_parameters) + "\ndistribution scheme " +
                                           to_string(options.scheme()) + ", communication dtype " +
                                           to_string(options.communication_dtype()),
      device,
      std::string(own_parameters ? "numbers of parameters" : "parameter shapes") + ", state-shaping options (" +
          optim::state_shaping_option_names() + ") and distributed options (scheme, communication_dtype)");
}

}  // namespace

Dash::Dash(std::vector<torch::optim::OptimizerParamGroup> param_groups, DashOptions defaults)
    : Dash(std::move(param_groups), std::move(defaults), nullptr) {}

Dash::Dash(std::vector<at::Tensor> params, DashOptions defaults)
    : Dash({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), nullptr) {}

Dash::Dash(std::vector<torch::optim::OptimizerParamGroup> param_groups, DashOptions defaults,
    std::shared_ptr<const DistributedContext> distributed)
    : Optimizer(std::move(param_groups), std::make_unique<DashOptions>(defaults)),
      distributed_(std::move(distributed)) {
  optim::check_options(defaults);
  for (const auto& group : param_groups_) {
    optim::check_options(optim::options_of(group));
  }
  check_ranks_agree(distributed_.get(), param_groups_);
  impl_ = std::make_unique<Dash::Impl>(param_groups_, distributed_);
}

Dash::Dash(std::vector<at::Tensor> params, DashOptions defaults, std::shared_ptr<const DistributedContext> distributed)
    : Dash({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), std::move(distributed)) {}

Dash::~Dash() = default;

void Dash::add_param_group(const torch::optim::OptimizerParamGroup& param_group) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  const bool stepped = impl_->steps_taken() > 0;
  TORCH_CHECK(!stepped || !distributed_ || distributed_->world_size() == 1,
      "dash::Dash: add_param_group after the first step is not supported with several ranks (they would split the "
      "blocks anew); add every parameter group before stepping");
  // The existing groups' state is kept as it is: their shapes must not have changed.
  if (stepped) impl_->check_layout(param_groups_);
  Optimizer::add_param_group(param_group);
  try {
    optim::check_options(optim::options_of(param_groups_.back()));
    optim::check_parameters(param_groups_);
    // Before the first step the state is built anew for all groups (so that it is
    // there for parameter_state() and the state dict at once); after it, the state so
    // far is kept and the new group's blocks start fresh (progressive unfreezing, a
    // head added in fine-tuning).
    if (stepped) {
      auto engine = std::make_unique<Dash::Impl>(param_groups_, distributed_);
      engine->adopt_state(std::move(*impl_));
      impl_ = std::move(engine);
    } else {
      rebuild_engine();
    }
  } catch (...) {
    param_groups_.pop_back();
    throw;
  }
}

void Dash::rebuild_engine() {
  check_ranks_agree(distributed_.get(), param_groups_);
  auto engine = std::make_unique<Dash::Impl>(param_groups_, distributed_);
  engine->continue_from(*impl_);
  impl_ = std::move(engine);
}

at::Tensor Dash::step(LossClosure closure) {
  // Buffers made in a step are kept for the next ones: not as inference tensors,
  // which a step outside torch.inference_mode() could not update. (The guard
  // turns grad mode on: the NoGradGuard must come after it.)
  const c10::InferenceMode buffers_are_not_inference(false);
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const std::lock_guard<std::mutex> lock(*mutex_);
  step_locked(/*check_groups=*/true, current_gradients());
  return loss;
}

void Dash::step_with_options(
    std::vector<std::optional<DashOptions>> changed_options, std::vector<at::Tensor> gradients) {
  const c10::InferenceMode buffers_are_not_inference(false);
  at::NoGradGuard no_grad;
  const std::lock_guard<std::mutex> lock(*mutex_);
  TORCH_CHECK(changed_options.size() == param_groups_.size(), "dash::Dash: ", changed_options.size(),
      " option sets for ", param_groups_.size(), " param groups");
  for (const auto& options : changed_options) {
    if (options) optim::check_options(*options);
  }
  auto swap_changed = [&] {
    for (size_t g = 0; g < param_groups_.size(); ++g) {
      if (changed_options[g]) std::swap(static_cast<DashOptions&>(param_groups_[g].options()), *changed_options[g]);
    }
  };
  swap_changed();
  try {
    step_locked(/*check_groups=*/false, gradients.empty() ? current_gradients() : std::move(gradients));
  } catch (...) {
    // A refused step (a state-layout edit, a non-finite gradient) leaves the options
    // as they were, so that the optimizer still saves and loads consistently.
    swap_changed();
    throw;
  }
  for (const auto& options : changed_options) option_updates_ += options ? 1 : 0;
}

std::vector<at::Tensor> Dash::current_gradients() const {
  std::vector<at::Tensor> gradients;
  for (const auto& group : param_groups_) {
    for (const auto& param : group.params()) gradients.push_back(param.grad());
  }
  return gradients;
}

void Dash::step_locked(bool check_groups, std::vector<at::Tensor> gradients) {
  // Setters and param-group edits get the construction's checks.
  if (check_groups) {
    for (const auto& group : param_groups_) optim::check_options(optim::options_of(group));
  }
  const bool same_params = impl_->matches(param_groups_);
  if (!same_params || (impl_->steps_taken() == 0 && !impl_->layout_matches(param_groups_))) {
    // Before the first step nothing is lost: the state is rebuilt for the groups as
    // they are now (parameters added, or options that shape the state edited).
    TORCH_CHECK(same_params || impl_->steps_taken() == 0,
        "dash::Dash: parameters changed after the first step; add all parameter groups before stepping");
    rebuild_engine();
  }
  impl_->check_layout(param_groups_);
  impl_->step(param_groups_, std::move(gradients));
}

DashDiagnostics Dash::diagnostics() const {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return impl_->diagnostics(param_groups_);
}

void Dash::profile_phases(bool enabled) { impl_->profile().enable(enabled); }

std::map<std::string, double> Dash::phase_times_ms() const { return impl_->profile().totals_ms(); }

void Dash::profile_memory(bool enabled) { impl_->profile_memory(enabled); }

int64_t Dash::state_bytes() const {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return impl_->state_bytes();
}

ParameterState Dash::parameter_state(size_t index) const {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return impl_->parameter_state(index, param_groups_);
}

int64_t Dash::communicated_bytes_per_step() const {
  const std::lock_guard<std::mutex> lock(*mutex_);
  return impl_->communicated_bytes_per_step();
}

void Dash::save(torch::serialize::OutputArchive& archive) const {
  const std::lock_guard<std::mutex> lock(*mutex_);
  archive.write("dash.format", c10::IValue(kCheckpointFormat));
  archive.write("dash.world_size", c10::IValue(distributed_ ? distributed_->world_size() : int64_t{1}));
  archive.write("dash.rank", c10::IValue(distributed_ ? distributed_->rank() : int64_t{0}));
  archive.write("dash.signature", c10::IValue(optim::groups_signature(param_groups_)));
  archive.write("dash.groups", c10::IValue(static_cast<int64_t>(param_groups_.size())));
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    torch::serialize::OutputArchive options_archive;
    optim::options_of(param_groups_[g]).serialize(options_archive);
    archive.write("dash.group." + std::to_string(g), options_archive);
  }
  const auto counts = impl_->step_counts();
  archive.write("dash.steps_taken", c10::IValue(counts.steps_taken));
  archive.write("dash.skipped_steps", c10::IValue(counts.skipped_steps));
  archive.write("dash.overflow_skipped_steps", c10::IValue(counts.overflow_skipped_steps));
  // The state keyed by parameter, as parameter_state() gives it: the one
  // representation every checkpoint has.
  size_t count = 0;
  for (const auto& group : param_groups_) count += group.params().size();
  for (size_t i = 0; i < count; ++i) {
    torch::serialize::OutputArchive entries;
    for (const auto& [name, tensor] : impl_->parameter_state(i, param_groups_)) entries.write(name, tensor, true);
    archive.write("dash.state." + std::to_string(i), entries);
  }
}

namespace {

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value.toInt();
}

// The checkpoint's format and its groups' options.
std::pair<int64_t, std::vector<DashOptions>> read_checkpoint_options(
    torch::serialize::InputArchive& archive, size_t groups) {
  const auto format = read_int(archive, "dash.format");
  TORCH_CHECK(format == 1 || format == kCheckpointFormat, "dash::Dash: unsupported checkpoint format ", format);
  TORCH_CHECK(read_int(archive, "dash.groups") == static_cast<int64_t>(groups), "dash::Dash: the checkpoint has ",
      read_int(archive, "dash.groups"), " parameter groups, this optimizer ", groups);
  std::vector<DashOptions> options(groups);
  for (size_t g = 0; g < groups; ++g) {
    torch::serialize::InputArchive options_archive;
    archive.read("dash.group." + std::to_string(g), options_archive);
    options[g].serialize(options_archive);
  }
  return {format, options};
}

// Which rank of how many wrote the archive (format 1 wrote no rank: `rank` is taken).
std::pair<int64_t, int64_t> writer_of(torch::serialize::InputArchive& archive, int64_t rank) {
  c10::IValue value;
  const int64_t world = archive.try_read("dash.world_size", value) ? value.toInt() : 1;
  return {archive.try_read("dash.rank", value) ? value.toInt() : rank, world};
}

std::string ranks_text(int64_t world) {
  return world == 1 ? std::string("a single process") : std::to_string(world) + " ranks";
}

// A format-2 archive's state keyed by parameter into `states` (the union over the
// shards), after its signature is checked against these groups'.
void read_parameter_states(torch::serialize::InputArchive& archive,
    const std::vector<torch::optim::OptimizerParamGroup>& groups, std::vector<ParameterState>& states) {
  c10::IValue signature;
  archive.read("dash.signature", signature);
  const auto expected = optim::groups_signature(groups);
  TORCH_CHECK(signature.toStringRef() == expected,
      "dash::Dash: the checkpoint was saved for other parameters or options.\ncheckpoint:\n", signature.toStringRef(),
      "\nthis optimizer:\n", expected);
  for (size_t i = 0; i < states.size(); ++i) {
    torch::serialize::InputArchive entries;
    archive.read("dash.state." + std::to_string(i), entries);
    for (const auto& name : entries.keys()) {
      at::Tensor tensor;
      entries.read(name, tensor, /*is_buffer=*/true);
      states[i].emplace_back(name, tensor);
    }
  }
}

StepCounts read_counts(torch::serialize::InputArchive& archive) {
  return {read_int(archive, "dash.steps_taken"), read_int(archive, "dash.skipped_steps"),
      read_int(archive, "dash.overflow_skipped_steps")};
}

}  // namespace

// Everything is read into a fresh engine and fresh options first; the optimizer
// is changed only after the whole checkpoint has been read and checked.
void Dash::load(torch::serialize::InputArchive& archive) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  load_archives({&archive}, /*resharded=*/false);
}

void Dash::load_resharded(std::vector<torch::serialize::InputArchive>& shards) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  TORCH_CHECK(!shards.empty(), "dash::Dash::load_resharded: no checkpoint shards");
  TORCH_CHECK(!distributed_ || distributed_->world_size() == 1 || optim::splits_blocks(distributed_.get()),
      "dash::Dash: ranks of local shards (DistributionScheme::LocalShards) hold the state of parameters of their own; "
      "each loads its own checkpoint (load(), on the same ranks and shards)");
  std::vector<torch::serialize::InputArchive*> archives;
  for (auto& shard : shards) archives.push_back(&shard);
  load_archives(archives, /*resharded=*/true);
}

// The archives every rank of the writing run saved, in rank order (`resharded`), or
// this rank's own (a plain load: for format 1, of this world size).
void Dash::load_archives(const std::vector<torch::serialize::InputArchive*>& archives, bool resharded) {
  const int64_t rank = distributed_ ? distributed_->rank() : 0;
  const int64_t world = distributed_ ? distributed_->world_size() : 1;
  int64_t format = 0;
  std::vector<DashOptions> options;
  std::vector<std::pair<int64_t, int64_t>> writers;
  for (size_t r = 0; r < archives.size(); ++r) {
    auto [shard_format, shard_options] = read_checkpoint_options(*archives[r], param_groups_.size());
    TORCH_CHECK(r == 0 || shard_format == format, "dash::Dash::load_resharded: shards of different formats");
    format = shard_format;
    if (r == 0) options = std::move(shard_options);
    writers.push_back(writer_of(*archives[r], resharded ? static_cast<int64_t>(r) : rank));
    const auto [writer, writers_world] = writers.back();
    if (resharded) {
      TORCH_CHECK(writers_world == static_cast<int64_t>(archives.size()), "dash::Dash::load_resharded: shard ", r,
          " was written by one of ", writers_world, " ranks, but ", archives.size(),
          " shards were given (all of them, in rank order)");
      TORCH_CHECK(writer == static_cast<int64_t>(r), "dash::Dash: checkpoint shard ", r, " of ", writers_world,
          " was not saved by rank ", r, " of ", writers_world, " (it was by rank ", writer,
          "): give every rank's, in rank order");
    } else {
      // This rank's own archive; or, where the ranks split one set of blocks, one a
      // single process wrote (every block's entries are there).
      const bool whole = format == kCheckpointFormat && writers_world == 1 && optim::splits_blocks(distributed_.get());
      TORCH_CHECK(whole || writers_world == world, "dash::Dash: the checkpoint holds the optimizer state of ",
          writers_world == 1 ? ranks_text(1) : "one of " + ranks_text(writers_world), ", this optimizer runs on ",
          ranks_text(world),
          "; resume with the same number of ranks (each rank loads its own shard), or give every rank's shard to "
          "load_resharded()");
      TORCH_CHECK(whole || writer == rank, "dash::Dash: the checkpoint holds the optimizer state of rank ", writer,
          " of ", writers_world, ", this is rank ", rank, ": each rank loads its own shard");
    }
  }
  install_loaded(options, [&](Impl& engine, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
    if (format == 1) {
      std::vector<optim::LegacyShard> shards;
      for (size_t r = 0; r < archives.size(); ++r) {
        shards.push_back(
            {archives[r], writers[r].first, writers[r].second, resharded || optim::splits_blocks(distributed_.get())});
      }
      const auto legacy = optim::read_legacy_shards(shards, engine.whole_plan(), engine.group_blockings(), groups);
      engine.load_parameter_states(legacy.states, legacy.counts);
      return;
    }
    std::vector<ParameterState> states(engine.parameter_count());
    for (auto* archive : archives) read_parameter_states(*archive, groups, states);
    const auto counts = read_counts(*archives.front());
    for (size_t r = 1; r < archives.size(); ++r) {
      const auto steps = read_counts(*archives[r]).steps_taken;
      TORCH_CHECK(steps == counts.steps_taken, "dash::Dash: checkpoint shards of different steps (rank 0 at ",
          counts.steps_taken, ", rank ", r, " at ", steps, ")");
    }
    engine.load_parameter_states(states, counts);
  });
}

void Dash::load_parameter_states(const std::vector<DashOptions>& group_options,
    const std::vector<ParameterState>& states, const StepCounts& counts) {
  const std::lock_guard<std::mutex> lock(*mutex_);
  TORCH_CHECK(group_options.size() == param_groups_.size(), "dash::Dash::load_parameter_states: options for ",
      group_options.size(), " param groups, this optimizer has ", param_groups_.size());
  for (const auto& options : group_options) optim::check_options(options);
  install_loaded(group_options, [&](Impl& engine, const std::vector<torch::optim::OptimizerParamGroup>&) {
    engine.load_parameter_states(states, counts);
  });
}

// The layout is checked with the checkpoint's options applied to these parameters.
void Dash::install_loaded(const std::vector<DashOptions>& options,
    const std::function<void(Impl&, const std::vector<torch::optim::OptimizerParamGroup>&)>& read) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    groups.emplace_back(param_groups_[g].params(), std::make_unique<DashOptions>(options[g]));
  }
  auto engine = std::make_unique<Dash::Impl>(groups, distributed_);
  read(*engine, groups);
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    param_groups_[g].set_options(std::make_unique<DashOptions>(options[g]));
  }
  impl_ = std::move(engine);
}

}  // namespace dash
