#include <dash/distributed.h>
#include <dash/optimizer.h>

#include "optim/dash_options.h"
#include "optim/engine.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/archive.h>

#include <string>
#include <utility>

namespace dash {

// Dash's private part is the engine itself (src/optim/engine.h).
class Dash::Impl : public optim::Engine {
 public:
  using optim::Engine::Engine;
};

namespace {

constexpr int64_t kCheckpointFormat = 1;

// The parameters and the options that shape the state, per group: what every rank
// of a distributed optimizer must agree on.
std::string groups_signature(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::string signature;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& options = static_cast<const DashOptions&>(groups[g].options());
    signature += "group " + std::to_string(g) + " B=" + std::to_string(options.block_size()) +
                 " 1d=" + std::to_string(static_cast<int>(options.one_dimensional())) +
                 " root=" + std::to_string(options.exponent_override()) +
                 " graft=" + std::to_string(static_cast<int>(options.grafting())) +
                 " momentum=" + std::to_string(options.momentum() > 0.0) + ":";
    for (const auto& param : groups[g].params()) signature += " " + c10::str(param.sizes());
    signature += "\n";
  }
  return signature;
}

// Describes everything the state's shapes depend on; a checkpoint only loads into
// an optimizer with the same description.
std::string layout_signature(
    const optim::Engine& engine, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::string signature = groups_signature(groups);
  signature += "stacks " + std::to_string(engine.stacks.size()) + " factors " + std::to_string(engine.factors.size());
  if (engine.distributed) {
    // Each rank's checkpoint holds its share of the blocks, which depends on both.
    signature += "\nrank " + std::to_string(engine.distributed->rank()) + " of " +
                 std::to_string(engine.distributed->world_size());
  }
  return signature;
}

// Ranks that disagree about the parameters would split different blocks and apply
// each other's updates to the wrong elements; this one collective rules it out.
void check_ranks_agree(
    const DistributedContext* distributed, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  if (distributed == nullptr || distributed->world_size() == 1) return;
  at::Device device = at::kCPU;
  for (const auto& group : groups) {
    if (!group.params().empty()) device = group.params().front().device();
  }
  distributed->check_same_on_all_ranks(groups_signature(groups), device,
      "parameter shapes and state-shaping options (block_size, one_dimensional, exponent_override, grafting, "
      "momentum)");
}

template <typename Visit>
void for_each_state_tensor(optim::Engine& engine, Visit&& visit) {
  auto moments = [&](const std::string& prefix, optim::MomentState& state) {
    visit(prefix + ".grad_ema", state.grad_ema);
    visit(prefix + ".graft_stat", state.graft_stat);
    visit(prefix + ".momentum", state.momentum);
    visit(prefix + ".steps", state.steps);
  };
  for (size_t s = 0; s < engine.stacks.size(); ++s) moments("stack." + std::to_string(s), engine.stacks[s].moments);
  for (size_t k = 0; k < engine.factors.size(); ++k) {
    const auto prefix = "factor." + std::to_string(k);
    visit(prefix + ".factors", engine.factors[k].factors);
    visit(prefix + ".roots", engine.factors[k].roots);
    visit(prefix + ".failures", engine.factors[k].failures);
    // Defined only once a warm-started EVD has run, or once the stack's first root
    // was computed (see Dash::load).
    visit(prefix + ".eigenvectors", engine.factors[k].basis.vectors);
    visit(prefix + ".eigenbasis_valid", engine.factors[k].basis.valid);
    visit(prefix + ".refresh_counts", engine.factors[k].refresh_counts);
    visit(prefix + ".consecutive_failures", engine.factors[k].consecutive_failures);
    visit(prefix + ".factor_resets", engine.factors[k].factor_resets);
  }
  for (size_t j = 0; j < engine.segments.size(); ++j) {
    moments("segment." + std::to_string(j), engine.segments[j].moments);
  }
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
    optim::check_options(static_cast<const DashOptions&>(group.options()));
  }
  check_ranks_agree(distributed_.get(), param_groups_);
  impl_ = std::make_unique<Dash::Impl>(param_groups_, distributed_);
}

Dash::Dash(std::vector<at::Tensor> params, DashOptions defaults, std::shared_ptr<const DistributedContext> distributed)
    : Dash({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults), std::move(distributed)) {}

Dash::~Dash() = default;

void Dash::rebuild_engine() {
  check_ranks_agree(distributed_.get(), param_groups_);
  auto engine = std::make_unique<Dash::Impl>(param_groups_, distributed_);
  engine->skipped_steps = impl_->skipped_steps;
  engine->overflow_skipped_steps = impl_->overflow_skipped_steps;
  engine->profile.enable(impl_->profile.enabled());
  impl_ = std::move(engine);
}

at::Tensor Dash::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  // Every step: setters and param-group edits get the construction's checks.
  for (const auto& group : param_groups_) optim::check_options(static_cast<const DashOptions&>(group.options()));
  const bool same_params = impl_->matches(param_groups_);
  if (!same_params || (impl_->steps_taken == 0 && !impl_->layout_matches(param_groups_))) {
    // Before the first step nothing is lost: the state is rebuilt for the groups as
    // they are now (parameters added, or options that shape the state edited).
    TORCH_CHECK(same_params || impl_->steps_taken == 0,
        "dash::Dash: parameters changed after the first step; add all parameter groups before stepping");
    rebuild_engine();
  }
  impl_->check_layout(param_groups_);
  impl_->step(param_groups_);
  return loss;
}

DashDiagnostics Dash::diagnostics() const {
  DashDiagnostics result;
  for (size_t k = 0; k < impl_->factors.size(); ++k) {
    const auto& stack = impl_->plan.factor_stacks[k];
    const auto& state = impl_->factors[k];
    const auto& options = static_cast<const DashOptions&>(param_groups_[stack.group].options());
    result.factor_stacks.push_back({stack.group, stack.size, stack.count, stack.root, state.failures.item<int64_t>(),
        options.execution() == Execution::Auto ? state.root_execution : options.execution(),
        state.calibrated_batched_ms, state.calibrated_per_block_ms});
    if (state.refresh_counts.defined()) {
      const auto counts = state.refresh_counts.cpu();
      auto& entry = result.factor_stacks.back();
      entry.roots_kept = counts[0].item<int64_t>();
      entry.roots_warm_started = counts[1].item<int64_t>();
      entry.roots_recomputed = counts[2].item<int64_t>();
    }
    if (state.factor_resets.defined()) result.factor_stacks.back().factor_resets = state.factor_resets.item<int64_t>();
    const bool auto_method = options.root().method() == RootMethod::Auto;
    result.factor_stacks.back().root_method = auto_method ? state.root_method : options.root().method();
    if (auto_method) result.factor_stacks.back().root_method_trials = state.root_method_trials;
  }
  for (const auto& stack : impl_->plan.gradient_stacks) {
    result.block_stacks.push_back({stack.group, stack.rows, stack.cols, stack.count(), stack.one_sided});
  }
  result.steps_taken = impl_->steps_taken;
  result.skipped_steps = impl_->skipped_steps;
  result.overflow_skipped_steps = impl_->overflow_skipped_steps;
  result.workspace_bytes = impl_->root_workspace.bytes();
  return result;
}

void Dash::profile_phases(bool enabled) { impl_->profile.enable(enabled); }

std::map<std::string, double> Dash::phase_times_ms() const { return impl_->profile.totals_ms(); }

int64_t Dash::state_bytes() const {
  int64_t bytes = 0;
  for_each_state_tensor(*impl_, [&](const std::string&, const at::Tensor& tensor) {
    if (tensor.defined()) bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  });
  return bytes;
}

int64_t Dash::communicated_bytes_per_step() const { return impl_->communicated_bytes_per_step(); }

void Dash::save(torch::serialize::OutputArchive& archive) const {
  archive.write("dash.format", c10::IValue(kCheckpointFormat));
  archive.write("dash.layout", c10::IValue(layout_signature(*impl_, param_groups_)));
  archive.write("dash.world_size", c10::IValue(distributed_ ? distributed_->world_size() : int64_t{1}));
  archive.write("dash.steps_taken", c10::IValue(impl_->steps_taken));
  archive.write("dash.skipped_steps", c10::IValue(impl_->skipped_steps));
  archive.write("dash.overflow_skipped_steps", c10::IValue(impl_->overflow_skipped_steps));
  archive.write("dash.groups", c10::IValue(static_cast<int64_t>(param_groups_.size())));
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    torch::serialize::OutputArchive options_archive;
    static_cast<const DashOptions&>(param_groups_[g].options()).serialize(options_archive);
    archive.write("dash.group." + std::to_string(g), options_archive);
  }
  for (size_t s = 0; s < impl_->stacks.size(); ++s) {
    archive.write("stack." + std::to_string(s) + ".host_steps", at::tensor(impl_->stacks[s].steps, at::kLong));
  }
  // Execution::Auto's and RootMethod::Auto's choices, so that a resumed run computes
  // its roots the same way.
  for (size_t k = 0; k < impl_->factors.size(); ++k) {
    archive.write("factor." + std::to_string(k) + ".root_execution",
        c10::IValue(static_cast<int64_t>(impl_->factors[k].root_execution)));
    archive.write("factor." + std::to_string(k) + ".root_method",
        c10::IValue(static_cast<int64_t>(impl_->factors[k].root_method)));
  }
  for_each_state_tensor(*impl_, [&](const std::string& key, const at::Tensor& tensor) {
    if (tensor.defined()) archive.write(key, tensor, /*is_buffer=*/true);
  });
}

// Everything is read into a fresh engine and fresh options first; the optimizer
// is changed only after the whole checkpoint has been read and checked.
void Dash::load(torch::serialize::InputArchive& archive) {
  auto read_value = [&](const std::string& key) {
    c10::IValue value;
    archive.read(key, value);
    return value;
  };
  TORCH_CHECK(read_value("dash.format").toInt() == kCheckpointFormat, "dash::Dash: unsupported checkpoint format");
  c10::IValue saved_world;
  const int64_t world_size = distributed_ ? distributed_->world_size() : 1;
  const int64_t saved_world_size = archive.try_read("dash.world_size", saved_world) ? saved_world.toInt() : 1;
  TORCH_CHECK(saved_world_size == world_size, "dash::Dash: the checkpoint holds the optimizer state of ",
      saved_world_size == 1 ? std::string("a single process") : "one of " + std::to_string(saved_world_size) + " ranks",
      ", this optimizer runs on ",
      world_size == 1 ? std::string("a single process") : std::to_string(world_size) + " ranks",
      "; resume with the same number of ranks (each rank loads its own shard)");
  TORCH_CHECK(read_value("dash.groups").toInt() == static_cast<int64_t>(param_groups_.size()),
      "dash::Dash: the checkpoint has ", read_value("dash.groups").toInt(), " parameter groups, this optimizer ",
      param_groups_.size());
  std::vector<DashOptions> options(param_groups_.size());
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    torch::serialize::InputArchive options_archive;
    archive.read("dash.group." + std::to_string(g), options_archive);
    options[g].serialize(options_archive);
  }
  // The layout is checked with the checkpoint's options applied to these parameters.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    groups.emplace_back(param_groups_[g].params(), std::make_unique<DashOptions>(options[g]));
  }
  auto engine = std::make_unique<Dash::Impl>(groups, distributed_);
  const auto saved_layout = read_value("dash.layout").toStringRef();
  const auto layout = layout_signature(*engine, groups);
  TORCH_CHECK(saved_layout == layout,
      "dash::Dash: the checkpoint was saved for other parameters or options.\ncheckpoint:\n", saved_layout,
      "\nthis optimizer:\n", layout);
  engine->steps_taken = read_value("dash.steps_taken").toInt();
  engine->skipped_steps = read_value("dash.skipped_steps").toInt();
  c10::IValue overflow_skipped;  // absent from checkpoints written before it was counted
  if (archive.try_read("dash.overflow_skipped_steps", overflow_skipped)) {
    engine->overflow_skipped_steps = overflow_skipped.toInt();
  }
  for (size_t s = 0; s < engine->stacks.size(); ++s) {
    at::Tensor host_steps;
    archive.read("stack." + std::to_string(s) + ".host_steps", host_steps, /*is_buffer=*/true);
    TORCH_CHECK(host_steps.numel() == static_cast<int64_t>(engine->stacks[s].steps.size()),
        "dash::Dash: corrupt checkpoint (stack ", s, " step counts)");
    auto values = host_steps.to(at::kLong).contiguous();
    engine->stacks[s].steps.assign(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
  }
  for (size_t k = 0; k < engine->factors.size(); ++k) {
    c10::IValue choice;
    if (!archive.try_read("factor." + std::to_string(k) + ".root_execution", choice)) continue;  // older checkpoint
    const auto value = choice.toInt();
    TORCH_CHECK(value >= 0 && value <= static_cast<int64_t>(Execution::Auto),
        "dash::Dash: corrupt checkpoint (factor stack ", k, " root execution ", value, ")");
    auto& state = engine->factors[k];
    state.root_execution = static_cast<Execution>(value);
    state.calibration_pending = state.root_execution == Execution::Auto;
    c10::IValue method;
    if (!archive.try_read("factor." + std::to_string(k) + ".root_method", method)) continue;  // older checkpoint
    TORCH_CHECK(method.toInt() >= 0 && method.toInt() <= static_cast<int64_t>(RootMethod::Auto),
        "dash::Dash: corrupt checkpoint (factor stack ", k, " root method ", method.toInt(), ")");
    state.root_method = static_cast<RootMethod>(method.toInt());
  }
  for_each_state_tensor(*engine, [&](const std::string& key, at::Tensor& tensor) {
    if (!tensor.defined()) {
      // The state a fresh engine allocates only on first use (a warm-started EVD's
      // eigenbasis, in factor stacks) is taken as saved, when it was.
      at::Tensor saved;
      if (key.rfind("factor.", 0) == 0 && archive.try_read(key, saved, /*is_buffer=*/true)) {
        tensor = saved.to(engine->params.front().device());
      }
      return;
    }
    at::Tensor saved;
    archive.read(key, saved, /*is_buffer=*/true);
    TORCH_CHECK(saved.sizes() == tensor.sizes() && saved.scalar_type() == tensor.scalar_type(),
        "dash::Dash: corrupt checkpoint: '", key, "' has shape ", saved.sizes(), " ", saved.scalar_type(),
        ", expected ", tensor.sizes(), " ", tensor.scalar_type());
    tensor.copy_(saved);
  });
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    param_groups_[g].set_options(std::make_unique<DashOptions>(options[g]));
  }
  impl_ = std::move(engine);
}

}  // namespace dash
