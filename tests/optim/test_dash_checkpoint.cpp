// torch::save / torch::load of the full optimizer state.

#include <dash/optimizer.h>

#include "support/captured_warnings.h"
#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace dash {
namespace {

struct Model {
  std::vector<at::Tensor> params;
  explicit Model(uint64_t seed, const std::vector<int64_t>& first_shape = {7, 5}) {
    auto generator = at::detail::createCPUGenerator(seed);
    params = {at::randn(first_shape, generator), at::randn({5}, generator), at::randn({2, 3, 3}, generator)};
    for (auto& p : params) p.set_requires_grad(true);
  }
};

DashOptions options() {
  return DashOptions(0.03)
      .block_size(4)
      .start_step(3)
      .root_frequency(4)
      .momentum(0.5)
      .weight_decay(0.01)
      .one_dimensional(OneDimensional::Shampoo1D);
}

// Gradients as a pure function of the step and the parameters, so that a resumed
// run sees exactly what the uninterrupted one saw.
void run_steps(Model& model, Dash& optimizer, int first, int count) {
  for (int t = first; t < first + count; ++t) {
    auto generator = at::detail::createCPUGenerator(1000 + t);
    for (auto& p : model.params) p.mutable_grad() = p.detach() * 0.2 + at::randn(p.sizes(), generator);
    optimizer.step();
  }
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "dash_" + name + ".pt"; }

// A checkpoint of a model (seed 2) after three steps.
std::string saved_checkpoint(const std::string& name) {
  Model model(2);
  Dash optimizer(model.params, options());
  run_steps(model, optimizer, 0, 3);
  const auto path = temp_path(name);
  torch::save(optimizer, path);
  return path;
}

// Trains 10 steps, saves, trains 10 more; a fresh optimizer (other initial values
// and options) loaded from the file must end bit-identical. Returns the diagnostics
// of the resumed optimizer.
DashDiagnostics expect_resume_is_bit_identical(const DashOptions& saved_options, const std::string& name) {
  Model uninterrupted(1);
  Dash optimizer(uninterrupted.params, saved_options);
  run_steps(uninterrupted, optimizer, 0, 10);
  const auto optimizer_path = temp_path(name);
  torch::save(optimizer, optimizer_path);
  std::vector<at::Tensor> saved_params;
  for (auto& p : uninterrupted.params) saved_params.push_back(p.detach().clone());
  run_steps(uninterrupted, optimizer, 10, 10);

  Model resumed(99);  // other initial values: everything must come from the checkpoint
  for (size_t i = 0; i < saved_params.size(); ++i) resumed.params[i].detach().copy_(saved_params[i]);
  Dash fresh(resumed.params, DashOptions(0.5));  // other options too: loaded from the file
  torch::load(fresh, optimizer_path);
  run_steps(resumed, fresh, 10, 10);
  for (size_t i = 0; i < saved_params.size(); ++i) {
    EXPECT_TRUE(at::equal(resumed.params[i], uninterrupted.params[i])) << "parameter " << i;
  }
  EXPECT_DOUBLE_EQ(static_cast<const DashOptions&>(fresh.param_groups()[0].options()).lr(), 0.03);
  std::remove(optimizer_path.c_str());
  return fresh.diagnostics();
}

TEST(DashCheckpoint, ResumeIsBitIdentical) { expect_resume_is_bit_identical(options(), "optimizer"); }

// The warm-started EVD's eigenvectors are state: without them the resumed run would
// recompute its roots by eigh and drift from the uninterrupted one.
TEST(DashCheckpoint, ResumeWithWarmStartedEigenbasesIsBitIdentical) {
  const auto diagnostics = expect_resume_is_bit_identical(
      options().root(dash::testing::solver_options(RootMethod::EVD).eigen(EigenOptions().refresh_tolerance(0.2))),
      "warm");
  int64_t warm_or_kept = 0;
  for (const auto& stack : diagnostics.factor_stacks) warm_or_kept += stack.roots_kept + stack.roots_warm_started;
  EXPECT_GT(warm_or_kept, 0) << "no root used a saved basis: the test would not see a lost one";
}

// A checkpoint from before ε had to be a normal float32 number, with an ε below
// FLT_MIN (subnormal, or 0 where flushed, in the float32 statistics), loads with ε
// raised to FLT_MIN and a warning naming the option; a checkpoint's ε of 0 (never
// accepted) is still an error.
// The options `archive` holds, through a file's bytes as a checkpoint's travel.
DashOptions options_from(torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes;
  archive.save_to(bytes);
  torch::serialize::InputArchive input;
  std::istringstream stream(bytes.str());
  input.load_from(stream);
  DashOptions loaded;
  loaded.serialize(input);
  return loaded;
}

DashOptions saved_and_loaded(const DashOptions& written) {
  torch::serialize::OutputArchive archive;
  written.serialize(archive);
  return options_from(archive);
}

TEST(DashCheckpoint, SubnormalEpsilonOfAnOlderCheckpointIsRaisedWithAWarning) {
  std::string warnings;
  {
    testing::CapturedWarnings captured;
    const auto loaded = saved_and_loaded(DashOptions().eps_graft(1e-40).adamw_eps(1e-39));
    warnings = captured.text();
    EXPECT_EQ(loaded.eps_graft(), static_cast<double>(std::numeric_limits<float>::min()));
    EXPECT_EQ(loaded.adamw_eps(), static_cast<double>(std::numeric_limits<float>::min()));
  }
  EXPECT_THAT(warnings, ::testing::HasSubstr("eps_graft 1e-40 is below float32's smallest normal number"));
  EXPECT_THAT(warnings, ::testing::HasSubstr("adamw_eps"));
  EXPECT_EQ(saved_and_loaded(DashOptions().eps_graft(1e-8)).eps_graft(), 1e-8) << "a normal ε is kept as it is";
  EXPECT_THROW(saved_and_loaded(DashOptions().eps_graft(0.0)), c10::Error);
}

// A checkpoint keeps its NewtonDB evaluation, Auto included; one written before the
// option existed ran the matmul iteration, and resumes with it.
TEST(DashCheckpoint, NewtonDBEvaluationIsKeptAndOlderCheckpointsKeepTheirBehaviour) {
  for (auto evaluation : {NewtonDBEvaluation::Matmuls, NewtonDBEvaluation::Eigh, NewtonDBEvaluation::Auto}) {
    auto written = DashOptions();
    written.root().newton_db().evaluation(evaluation);
    EXPECT_EQ(saved_and_loaded(written).root().newton_db().evaluation(), evaluation);
  }
  torch::serialize::OutputArchive older;  // only some options, none of them the evaluation
  older.write("lr", c10::IValue(0.5));
  const auto loaded = options_from(older);
  EXPECT_EQ(loaded.lr(), 0.5);
  EXPECT_EQ(loaded.root().newton_db().evaluation(), NewtonDBEvaluation::Matmuls);
  // Written before 1-D parameters were decayed by default: they stay undecayed.
  EXPECT_TRUE(DashOptions().decay_one_dimensional());
  EXPECT_FALSE(loaded.decay_one_dimensional());
  EXPECT_TRUE(saved_and_loaded(DashOptions()).decay_one_dimensional());
}

// The rounded roots of bfloat16 preconditioning are not saved: the resumed run
// rounds the loaded float32 roots, as the uninterrupted one rounded them after
// their computation, and the option itself comes back from the file.
TEST(DashCheckpoint, ResumeWithBFloat16PreconditioningIsBitIdentical) {
  expect_resume_is_bit_identical(options().preconditioning_precision(MatmulPrecision::BF16), "bf16_preconditioning");
}

// bfloat16 state is saved as it is stored, and resumes bit for bit.
TEST(DashCheckpoint, ResumeWithBFloat16StateIsBitIdentical) {
  expect_resume_is_bit_identical(options()
                                     .factor_precision(MatmulPrecision::BF16)
                                     .root_precision(MatmulPrecision::BF16)
                                     .moment_precision(MatmulPrecision::BF16),
      "bf16_state");
}

// Steps a model, fails to load `path` into its optimizer, steps on: the parameters
// must equal those of a twin that never tried to load.
void expect_failed_load_changes_nothing(
    const std::vector<int64_t>& first_shape, const std::string& path, const std::string& expected_message) {
  Model model(3, first_shape);
  Model twin(3, first_shape);
  Dash optimizer(model.params, options());
  Dash twin_optimizer(twin.params, options());
  run_steps(model, optimizer, 0, 5);
  run_steps(twin, twin_optimizer, 0, 5);
  try {
    torch::load(optimizer, path);
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_THAT(error.what_without_backtrace(), ::testing::HasSubstr(expected_message));
  }
  run_steps(model, optimizer, 5, 2);
  run_steps(twin, twin_optimizer, 5, 2);
  for (size_t i = 0; i < model.params.size(); ++i) EXPECT_TRUE(at::equal(model.params[i], twin.params[i]));
}

// Every solver option, each set away from its default, comes back from a checkpoint
// into an optimizer built with defaults: the per-solver structs are stored field by
// field under their flat names (root.newton_steps, ...), as before they existed.
TEST(DashCheckpoint, EverySolverOptionRoundTrips) {
  InverseRootOptions root;
  root.method(RootMethod::Chebyshev).epsilon(1e-7).relative_epsilon(1e-5).precision(MatmulPrecision::BF16);
  root.auto_max_error(0.25);
  root.eigen().heuristic(EigenHeuristic::AbsAdd).refresh_tolerance(0.125).warm_iterations(3);
  root.newton().steps(7).tolerance(1e-3).check_interval(3);
  root.newton_db().polynomial(NewtonDBPolynomial::Minimax5).interval_min(1e-4).evaluation(NewtonDBEvaluation::Eigh);
  root.chebyshev().degree(33).interval_min(2e-3);
  root.scaling().method(Scaling::PowerIteration).iterations(6).vectors(5).margin(1.5);
  Model model(3);
  Dash saved(model.params, options().root(root));
  const auto path = temp_path("solver_options");
  torch::save(saved, path);
  Dash loaded(model.params, options());
  torch::load(loaded, path);
  std::remove(path.c_str());

  const auto& r = static_cast<const DashOptions&>(loaded.param_groups()[0].options()).root();
  EXPECT_EQ(r.method(), RootMethod::Chebyshev);
  EXPECT_EQ(r.epsilon(), 1e-7);
  EXPECT_EQ(r.relative_epsilon(), 1e-5);
  EXPECT_EQ(r.precision(), MatmulPrecision::BF16);
  EXPECT_EQ(r.auto_max_error(), 0.25);
  EXPECT_EQ(r.eigen().heuristic(), EigenHeuristic::AbsAdd);
  EXPECT_EQ(r.eigen().refresh_tolerance(), 0.125);
  EXPECT_EQ(r.eigen().warm_iterations(), 3);
  EXPECT_EQ(r.newton().steps(), 7);
  EXPECT_EQ(r.newton().tolerance(), 1e-3);
  EXPECT_EQ(r.newton().check_interval(), 3);
  EXPECT_EQ(r.newton_db().polynomial(), NewtonDBPolynomial::Minimax5);
  EXPECT_EQ(r.newton_db().interval_min(), 1e-4);
  EXPECT_EQ(r.newton_db().evaluation(), NewtonDBEvaluation::Eigh);
  EXPECT_EQ(r.chebyshev().degree(), 33);
  EXPECT_EQ(r.chebyshev().interval_min(), 2e-3);
  EXPECT_EQ(r.scaling().method(), Scaling::PowerIteration);
  EXPECT_EQ(r.scaling().iterations(), 6);
  EXPECT_EQ(r.scaling().vectors(), 5);
  EXPECT_EQ(r.scaling().margin(), 1.5);
}

TEST(DashCheckpoint, OtherShapesGiveAClearErrorAndLeaveStateUnchanged) {
  const auto path = saved_checkpoint("shapes");
  expect_failed_load_changes_nothing({6, 5}, path, "saved for other parameters");
  std::remove(path.c_str());
}

TEST(DashCheckpoint, CorruptFileGivesAnErrorAndLeavesStateUnchanged) {
  const auto path = saved_checkpoint("corrupt");
  {  // truncate the file
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  expect_failed_load_changes_nothing({7, 5}, path, "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dash
