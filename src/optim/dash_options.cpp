#include "optim/dash_options.h"
#include "optim/grafting.h"
#include "optim/option_fields.h"

#include <torch/serialize/archive.h>

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

namespace dash {

DashOptions::DashOptions(double lr) : lr_(lr) {}

double DashOptions::get_lr() const { return lr(); }
void DashOptions::set_lr(const double lr) {
  // Schedulers set lr between steps; a bad value is refused here, at its source.
  optim::check_float32_range(lr, "lr");
  this->lr(lr);
}

namespace {

// Options are stored under their names; enums as integers, so that a checkpoint
// records every option.
template <typename Value>
void write(torch::serialize::OutputArchive& archive, const char* name, Value value) {
  archive.write(name, c10::IValue(value));
}

// A key missing from the archive keeps the fallback: checkpoints written before an
// option existed load with the behaviour they were written with. The fallback is
// the default, except where the default changed after the option appeared
// (newton_db_evaluation, below): there it is the value such checkpoints ran with.
template <typename Value>
Value read(torch::serialize::InputArchive& archive, const char* name, Value fallback) {
  c10::IValue value;
  if (!archive.try_read(name, value)) return fallback;
  if constexpr (std::is_same_v<Value, bool>)
    return value.toBool();
  else if constexpr (std::is_same_v<Value, double>)
    return value.toDouble();
  else
    return static_cast<Value>(value.toInt());
}

}  // namespace

void DashOptions::serialize(torch::serialize::OutputArchive& archive) const {
  auto as_stored = [](auto value) {
    using Value = decltype(value);
    if constexpr (std::is_enum_v<Value>)
      return static_cast<int64_t>(value);
    else
      return value;
  };
#define DASH_WRITE(name, type, help) write(archive, #name, as_stored(name()));
#define DASH_WRITE_ROOT(name, type, path, help) write(archive, "root." #name, as_stored(root().path()));
  DASH_OPTION_FIELDS(DASH_WRITE)
  DASH_ROOT_FIELDS(DASH_WRITE_ROOT)
#undef DASH_WRITE
#undef DASH_WRITE_ROOT
  write(archive, "adamw_beta1", std::get<0>(adamw_betas()));
  write(archive, "adamw_beta2", std::get<1>(adamw_betas()));
}

void DashOptions::serialize(torch::serialize::InputArchive& archive) {
  DashOptions loaded;
  auto root_options = root();
  // Checkpoints from before newton_db_evaluation existed ran NewtonDB's matmul
  // iteration, which Auto, the later default, is not on a CPU.
  root_options.newton_db().evaluation(NewtonDBEvaluation::Matmuls);
  // And those from before workspace_limit existed, whole stacks (chunked roots can
  // differ in their last bits).
  loaded.workspace_limit(0.0);
  // And those from before decay_one_dimensional existed decayed the matrices only.
  loaded.decay_one_dimensional(false);
#define DASH_READ(name, type, help) loaded.name(read<type>(archive, #name, loaded.name()));
#define DASH_READ_ROOT(name, type, path, help) \
  root_options.path(read<type>(archive, "root." #name, root_options.path()));
  DASH_OPTION_FIELDS(DASH_READ)
  DASH_ROOT_FIELDS(DASH_READ_ROOT)
#undef DASH_READ
#undef DASH_READ_ROOT
  loaded.root(root_options);
  loaded.adamw_betas(std::make_tuple(read<double>(archive, "adamw_beta1", std::get<0>(loaded.adamw_betas())),
      read<double>(archive, "adamw_beta2", std::get<1>(loaded.adamw_betas()))));
  // Checkpoints written before ε had to be a normal float32 number may hold one in
  // (0, FLT_MIN): in the float32 statistics it was subnormal or flushed to 0, so
  // FLT_MIN changes what they computed only where that ε made 0/0.
  auto raise_subnormal = [](double eps, const char* name) {
    constexpr double smallest = std::numeric_limits<float>::min();
    if (!(eps > 0.0 && eps < smallest)) return eps;
    TORCH_WARN("dash::Dash: the checkpoint's ", name, " ", eps, " is below float32's smallest normal number; using ",
        smallest, ", the least dash now accepts");
    return smallest;
  };
  loaded.eps_graft(raise_subnormal(loaded.eps_graft(), "eps_graft"));
  loaded.adamw_eps(raise_subnormal(loaded.adamw_eps(), "adamw_eps"));
  optim::check_options(loaded);
  *this = loaded;
}

namespace optim {

namespace {

// `value` in the fewest digits that read back as it (1.0000001, not the stream's
// six-digit 1), so that an error shows the value it refuses.
std::string exactly(double value) {
  std::ostringstream text;
  for (int digits = 6; digits <= 17; ++digits) {
    text.str("");
    text.precision(digits);
    text << value;
    if (!std::isfinite(value) || std::strtod(text.str().c_str(), nullptr) == value) break;
  }
  return text.str();
}

}  // namespace

void check_float32_range(double value, const char* name) {
  constexpr double largest = std::numeric_limits<float>::max();
  TORCH_CHECK(value >= 0.0 && value <= largest, "dash::Dash: ", name, " must be in [0, ", largest,
      "] (it enters float32 arithmetic, where larger values are Inf), got ", exactly(value));
}

void check_options(const DashOptions& o) {
  auto check_beta = [](double beta, const char* name, bool one_allowed) {
    TORCH_CHECK(beta >= 0.0 && (beta < 1.0 || (one_allowed && beta == 1.0)), "dash::Dash: ", name, " must be in [0, 1",
        one_allowed ? "]" : ")", ", got ", exactly(beta));
  };
  check_float32_range(o.lr(), "lr");
  check_beta(o.beta_grad(), "beta_grad", false);
  check_beta(o.beta_factor(), "beta_factor", /*one_allowed=*/true);  // 1: plain sums
  check_beta(o.beta_graft(), "beta_graft", false);
  check_beta(std::get<0>(o.adamw_betas()), "adamw_betas[0]", false);
  check_beta(std::get<1>(o.adamw_betas()), "adamw_betas[1]", false);
  // ε > 0 in float32, the statistics' dtype: with ε = 0 a zero gradient makes 0/0 in
  // the Adam-type directions, and below FLT_MIN ε is 0 or subnormal (flushed to 0
  // where the CPU flushes subnormals).
  auto check_eps = [](double eps, const char* name) {
    TORCH_CHECK(eps >= std::numeric_limits<float>::min() && eps <= std::numeric_limits<float>::max(),
        "dash::Dash: ", name, " must be in [", std::numeric_limits<float>::min(), ", ",
        std::numeric_limits<float>::max(), "] (float32's smallest normal and largest numbers), got ", exactly(eps));
  };
  check_eps(o.eps_graft(), "eps_graft");
  check_eps(o.adamw_eps(), "adamw_eps");
  TORCH_CHECK(o.block_size() >= 1, "dash::Dash: block_size must be >= 1, got ", o.block_size());
  TORCH_CHECK(o.root_frequency() >= 1, "dash::Dash: root_frequency must be >= 1, got ", o.root_frequency());
  TORCH_CHECK(o.start_step() >= 1, "dash::Dash: start_step must be >= 1, got ", o.start_step());
  TORCH_CHECK(o.exponent_override() >= 0, "dash::Dash: exponent_override must be >= 0 (0 = default), got ",
      o.exponent_override());
  TORCH_CHECK(
      o.momentum() >= 0.0 && o.momentum() < 1.0, "dash::Dash: momentum must be in [0, 1), got ", exactly(o.momentum()));
  TORCH_CHECK(!o.nesterov() || o.momentum() > 0.0, "dash::Dash: nesterov needs momentum > 0");
  TORCH_CHECK(o.newton_schulz_steps() >= 1 && o.newton_schulz_steps() <= 100,
      "dash::Dash: newton_schulz_steps must be in [1, 100], got ", o.newton_schulz_steps());
  check_float32_range(o.weight_decay(), "weight_decay");
  // The parameters are scaled by 1 − lr·weight_decay in their own (float32) dtype.
  TORCH_CHECK(o.lr() * o.weight_decay() <= std::numeric_limits<float>::max(),
      "dash::Dash: lr · weight_decay = ", o.lr() * o.weight_decay(), " is beyond float32's range (lr ", o.lr(),
      ", weight_decay ", o.weight_decay(), ")");
  TORCH_CHECK(o.max_consecutive_root_failures() >= 0,
      "dash::Dash: max_consecutive_root_failures must be >= 0 (0 = never raise), got ",
      o.max_consecutive_root_failures());
  // bfloat16 has float32's exponent range; float16 would overflow where the roots
  // are large (up to ε^(-1/p)) and Ĝ is not small.
  TORCH_CHECK(o.preconditioning_precision() != MatmulPrecision::FP16,
      "dash::Dash: preconditioning_precision fp16 is not supported (L̄ Ĝ R̄ can exceed float16's range of 65504); "
      "use bf16 or fp32");
  auto check_state_precision = [](MatmulPrecision precision, const char* name) {
    TORCH_CHECK(precision != MatmulPrecision::FP16, "dash::Dash: ", name,
        " fp16 is not supported (factors, roots and statistics can exceed float16's range of 65504); use bf16 or fp32");
  };
  check_state_precision(o.factor_precision(), "factor_precision");
  check_state_precision(o.root_precision(), "root_precision");
  check_state_precision(o.moment_precision(), "moment_precision");
  TORCH_CHECK(o.workspace_limit() >= 0.0 && std::isfinite(o.workspace_limit()),
      "dash::Dash: workspace_limit must be finite and >= 0 (a fraction of the state in (0, 1), bytes from 1 on, 0 "
      "for no limit), got ",
      o.workspace_limit());
  // The roots it will ask for: matrices' and 1-D Shampoo's default, or the override.
  for (int64_t p : {int64_t{4}, int64_t{2}}) {
    check_inverse_root_options(o.exponent_override() > 0 ? o.exponent_override() : p, o.root());
  }
}

StepHyper step_hyper(const DashOptions& o) {
  return {o.beta_grad(), o.beta_graft(), o.eps_graft(), o.grafting(), o.bias_correction(), o.momentum(), o.nesterov()};
}

StepHyper adamw_hyper(const DashOptions& o) {
  return {std::get<0>(o.adamw_betas()), std::get<1>(o.adamw_betas()), o.adamw_eps(), GraftingType::Adam,
      /*bias_correction=*/true, 0.0, false};
}

blocking::GroupBlocking group_blocking(const DashOptions& o) {
  return {o.block_size(), o.one_dimensional() == OneDimensional::Shampoo1D, o.exponent_override()};
}

std::vector<StateShapingOption> state_shaping_options(const DashOptions& o) {
  const bool statistic = grafting_for(o.grafting()).keeps_statistic();
  const bool momentum = o.momentum() > 0.0;
  return {
      {"block_size", "B", o.block_size(), std::to_string(o.block_size())},
      {"one_dimensional", "1d", static_cast<int64_t>(o.one_dimensional()), to_string(o.one_dimensional())},
      {"exponent_override", "root", o.exponent_override(), std::to_string(o.exponent_override())},
      // Grafting types that keep a statistic share their state's shapes; ranks
      // still have to agree on the type itself.
      {"grafting", "graft", static_cast<int64_t>(o.grafting()), statistic ? "with a statistic" : "without a statistic"},
      {"momentum", "momentum", momentum ? 1 : 0, momentum ? "on" : "off"},
      // Each family keeps state fields of its own (its field table).
      {"preconditioner", "family", static_cast<int64_t>(o.preconditioner()), to_string(o.preconditioner())},
  };
}

std::string state_shaping_option_names() {
  std::string names;
  for (const auto& option : state_shaping_options(DashOptions())) {
    names += (names.empty() ? "" : ", ") + std::string(option.name);
  }
  return names;
}

std::string state_layout(const DashOptions& o) {
  std::string layout;
  for (const auto& option : state_shaping_options(o)) {
    layout += (layout.empty() ? "" : ", ") + std::string(option.name) + " " + option.layout;
  }
  return layout;
}

std::string groups_signature(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, bool with_shapes, bool before_families) {
  // The format is part of every checkpoint ("dash.signature", and format 1's
  // "dash.layout"): keep it as it is.
  std::string signature;
  for (size_t g = 0; g < groups.size(); ++g) {
    signature += "group " + std::to_string(g);
    for (const auto& option : state_shaping_options(options_of(groups[g]))) {
      if (before_families && std::string(option.key) == "family") continue;
      signature += " " + std::string(option.key) + "=" + std::to_string(option.value);
    }
    signature += ":";
    if (!with_shapes) signature += " " + std::to_string(groups[g].params().size()) + " parameters";
    for (const auto& param : groups[g].params()) {
      if (with_shapes) signature += " " + c10::str(param.sizes());
    }
    signature += "\n";
  }
  return signature;
}

}  // namespace optim
}  // namespace dash
