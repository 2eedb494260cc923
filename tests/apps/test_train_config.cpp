// dash-train configuration: config files, command line, checks, lr schedule.

#include "apps/train_test_support.h"
#include "command_line.h"
#include "llama.h"
#include "optimizer_factory.h"
#include "support/error_message.h"
#include "train_config.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace dash_train {
namespace {

using dash::testing::error_of;
using ::testing::HasSubstr;
using testing::TemporaryFolder;
using testing::write_file;

CommandLine parse(std::vector<std::string> arguments) { return parse_command_line(arguments); }

TEST(TrainConfig, ConfigFileAndCommandLineSetKeysWithCommandLineLast) {
  TemporaryFolder folder;
  write_file(folder.file("config.json"), R"({"optimizer": "dash", "lr": 0.01, "root_method": "cn", "steps": 50})");
  const auto line = parse({"train", "--lr", "2e-3", "--config", folder.file("config.json"), "--block-size=64",
      "--resume", "--progress", "false"});
  EXPECT_EQ(line.command, "train");
  EXPECT_EQ(line.config.optimizer, "dash");
  EXPECT_EQ(line.config.dash.root().method(), dash::RootMethod::CoupledNewton);
  EXPECT_EQ(line.config.steps, 50);
  EXPECT_DOUBLE_EQ(line.config.lr, 2e-3);
  EXPECT_EQ(line.config.dash.block_size(), 64);
  EXPECT_TRUE(line.config.resume);
  EXPECT_FALSE(line.config.progress);
}

// The DASH keys are the optimizer's options (every one but those dash-train's own keys
// set), with DashOptions' defaults but for dash_train_defaults()'s two, and help.
TEST(TrainConfig, DashKeysAreTheOptimizerOptionsWithItsDefaults) {
  const auto defaults = to_json(TrainConfig{});
  const auto help = config_keys_help();
  std::vector<std::string> names;
  for (const auto& key : dash_keys()) {
    names.push_back(key.name);
    EXPECT_THAT(help, HasSubstr(key.help)) << key.name;
    if (key.name == "block_size" || key.name == "execution") continue;
    EXPECT_EQ(defaults.at(key.name), dash_key_value(dash::DashOptions(), key.name)) << key.name;
  }
  for (const std::string name : {"root_method", "newton_steps", "newton_db_evaluation", "epsilon", "power_vectors",
           "tolerance", "momentum", "factor_precision", "workspace_limit"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const std::string name : {"lr", "weight_decay", "beta_grad", "eps_graft", "maximize"}) {
    EXPECT_EQ(std::find(names.begin(), names.end(), name), names.end()) << name << " is dash-train's own key or fixed";
  }
  EXPECT_EQ(defaults.at("block_size"), 128);
  EXPECT_EQ(defaults.at("execution"), "batched");
}

// Configs of earlier runs name four DASH keys as they were called then.
TEST(TrainConfig, EarlierKeyNamesStillRead) {
  TrainConfig config;
  apply_json(config, nlohmann::json::parse(R"({"root_epsilon": 1e-6, "root_relative_epsilon": 1e-3,
          "ndb_polynomial": "minimax3", "ndb_evaluation": "eigh"})"),
      "test");
  EXPECT_DOUBLE_EQ(config.dash.root().epsilon(), 1e-6);
  EXPECT_DOUBLE_EQ(config.dash.root().relative_epsilon(), 1e-3);
  EXPECT_EQ(config.dash.root().newton_db().polynomial(), dash::NewtonDBPolynomial::Minimax3);
  EXPECT_EQ(config.dash.root().newton_db().evaluation(), dash::NewtonDBEvaluation::Eigh);
  EXPECT_THAT(error_of([&] { apply_json(config, nlohmann::json::parse(R"({"root_method": "svd"})"), "test"); }),
      HasSubstr("'root_method' (test)"));
  EXPECT_THAT(error_of([&] { apply_json(config, nlohmann::json::parse(R"({"newton_steps": 2.5})"), "test"); }),
      HasSubstr("'newton_steps' (test) expects an integer"));
}

// The workspace limit reaches the optimizer, and is not a key a resumed run must keep.
TEST(TrainConfig, WorkspaceLimitReachesTheOptimizer) {
  EXPECT_DOUBLE_EQ(TrainConfig().dash.workspace_limit(), dash::DashOptions().workspace_limit());
  auto config = parse({"train", "--optimizer", "dash", "--workspace-limit", "3e6"}).config;
  EXPECT_DOUBLE_EQ(config.dash.workspace_limit(), 3e6);
  const std::vector<at::Tensor> params = {at::randn({8, 8}).set_requires_grad(true)};
  const auto optimizer = make_optimizer(config, params);
  const auto& options = static_cast<const dash::DashOptions&>(optimizer->param_groups().front().options());
  EXPECT_DOUBLE_EQ(options.workspace_limit(), 3e6);
  const auto keys = checkpoint_compatibility_keys();
  EXPECT_EQ(std::find(keys.begin(), keys.end(), "workspace_limit"), keys.end());
}

// A value the float32 arithmetic cannot hold is refused when the command line is
// read, naming its key (it used to fail mid-run, naming none).
TEST(TrainConfig, ValuesBeyondFloat32AreRefusedByKey) {
  for (const std::string key : {"clip-grad-norm", "weight-decay", "lr", "eps", "epsilon"}) {
    auto name = key;
    std::replace(name.begin(), name.end(), '-', '_');
    EXPECT_THAT(error_of([&] {
      parse({"train", "--" + key, "1e308"});
    }),
        HasSubstr("'" + name + "' must be at most"))
        << key;
  }
}

// bfloat16 state reaches the optimizer; it changes the arithmetic, so a resumed run
// must keep it.
TEST(TrainConfig, StatePrecisionsReachTheOptimizer) {
  auto config =
      parse({"train", "--optimizer", "dash", "--root-precision", "bf16", "--moment-precision", "bf16"}).config;
  const std::vector<at::Tensor> params = {at::randn({8, 8}).set_requires_grad(true)};
  const auto optimizer = make_optimizer(config, params);
  const auto& options = static_cast<const dash::DashOptions&>(optimizer->param_groups().front().options());
  EXPECT_EQ(options.root_precision(), dash::MatmulPrecision::BF16);
  EXPECT_EQ(options.moment_precision(), dash::MatmulPrecision::BF16);
  EXPECT_EQ(options.factor_precision(), dash::MatmulPrecision::FP32);
  const auto keys = checkpoint_compatibility_keys();
  EXPECT_NE(std::find(keys.begin(), keys.end(), "root_precision"), keys.end());
  EXPECT_THAT(error_of([&] { parse({"train", "--factor-precision", "fp64"}); }), HasSubstr("factor_precision"));
}

// `--name big --resume` is enough: the configuration comes from the run folder's
// config.json, but for where the last invocation stopped (stop_at); options given
// again go over the recorded ones.
TEST(TrainConfig, AResumedRunTakesItsConfigurationFromItsFolder) {
  TemporaryFolder folder;
  TrainConfig original;
  original.optimizer = "dash";
  original.lr = 0.01;
  original.dash.block_size(64);
  original.stop_at = 50;
  original.eval_every = 7;
  std::filesystem::create_directories(folder.file("big"));
  write_file(folder.file("big/config.json"), to_json(original).dump(2));
  auto resumed = parse({"train", "--out-dir", folder.path(), "--name", "big", "--resume"}).config;
  EXPECT_EQ(resumed.optimizer, "dash");
  EXPECT_DOUBLE_EQ(resumed.lr, 0.01);
  EXPECT_EQ(resumed.dash.block_size(), 64);
  EXPECT_EQ(resumed.eval_every, 7);
  EXPECT_EQ(resumed.stop_at, 0) << "where the last invocation stopped is not inherited";
  EXPECT_TRUE(resumed.resume);
  EXPECT_EQ(parse({"train", "--out-dir", folder.path(), "--name", "big", "--resume", "--block-size", "32"})
                .config.dash.block_size(),
      32);
  EXPECT_EQ(parse({"train", "--out-dir", folder.path(), "--name", "big"}).config.dash.block_size(),
      TrainConfig().dash.block_size())
      << "a new run (an error later, the folder being taken) takes nothing from it";
}

// Errors that name the key or the file: a device torch does not know, a folder given
// as a config file.
TEST(TrainConfig, BadDeviceAndConfigFolderAreNamed) {
  EXPECT_THAT(error_of([&] { parse({"train", "--device", "tpu"}); }), HasSubstr("'device' must be cpu, cuda"));
  TemporaryFolder folder;
  EXPECT_THAT(error_of([&] {
    parse({"train", "--config", folder.path()});
  }),
      HasSubstr("'" + folder.path() + "' is a folder"));
}

TEST(TrainConfig, EveryKeyRoundTripsThroughJson) {
  TrainConfig config;
  config.optimizer = "dash";
  config.lr = 0.25;
  config.layers = 7;
  config.resume = true;
  TrainConfig copy;
  apply_json(copy, to_json(config), "test");
  EXPECT_EQ(to_json(copy), to_json(config));
}

TEST(TrainConfig, UnknownKeysAreErrorsThatNameThem) {
  TemporaryFolder folder;
  write_file(folder.file("config.json"), R"({"lr": 0.01, "learning_rate": 0.02})");
  EXPECT_THAT(error_of([&] {
    parse({"--config", folder.file("config.json")});
  }),
      HasSubstr("unknown key 'learning_rate'"));
  EXPECT_THAT(error_of([&] { parse({"--warmup", "10"}); }), HasSubstr("unknown key 'warmup'"));
  EXPECT_THAT(error_of([&] { parse({"compare", "--runs"}); }), HasSubstr("needs a value"));
  EXPECT_THAT(error_of([&] { parse({"--seeds", "1,2"}); }), HasSubstr("belong to 'compare'"));
  EXPECT_THAT(error_of([&] { parse({"fit"}); }), HasSubstr("unknown command 'fit'"));
}

TEST(TrainConfig, OutOfRangeAndWronglyTypedValuesAreErrorsThatNameTheKey) {
  EXPECT_THAT(error_of([&] { parse({"--lr", "-1"}); }), HasSubstr("'lr' must be > 0"));
  EXPECT_THAT(error_of([&] { parse({"--steps", "0"}); }), HasSubstr("'steps' must be ≥ 1"));
  EXPECT_THAT(error_of([&] { parse({"--steps", "2.5"}); }), HasSubstr("'steps' (command line) expects an integer"));
  EXPECT_THAT(error_of([&] { parse({"--beta2", "1"}); }), HasSubstr("'beta2' must be in [0, 1)"));
  EXPECT_THAT(error_of([&] { parse({"--optimizer", "sgd"}); }), HasSubstr("'optimizer' must be adamw or dash"));
  EXPECT_THAT(error_of([&] { parse({"--root-method", "svd"}); }), HasSubstr("'root_method'"));
  EXPECT_THAT(error_of([&] { parse({"--grafting", "lion"}); }), HasSubstr("'grafting'"));
  EXPECT_THAT(error_of([&] { parse({"--heads", "3"}); }), HasSubstr("heads"));
  EXPECT_THAT(error_of([&] { parse({"--stop-at", "500"}); }), HasSubstr("'stop_at'"));
  // Numbers outside double or int64 name the key, not the JSON library or a wrapped -1.
  EXPECT_THAT(error_of([&] { parse({"--lr", "1e400"}); }), HasSubstr("--lr 1e400: the number is out of range"));
  EXPECT_THAT(error_of([&] {
    parse({"--steps", "18446744073709551615"});
  }),
      HasSubstr("'steps' (command line) expects an integer in [-2^63, 2^63)"));
  EXPECT_THAT(error_of([&] { parse({"--steps", "1e30"}); }), HasSubstr("'steps' (command line) expects an integer"));
  EXPECT_THAT(error_of([&] { parse({"compare", "--seeds", "18446744073709551615"}); }), HasSubstr("--seeds"));
  TemporaryFolder folder;
  write_file(folder.file("config.json"), R"({"lr": "fast"})");
  EXPECT_THAT(error_of([&] { parse({"--config", folder.file("config.json")}); }), HasSubstr("expects a number"));
  write_file(folder.file("huge.json"), R"({"lr": 1e400})");
  EXPECT_THAT(error_of([&] { parse({"--config", folder.file("huge.json")}); }), HasSubstr("not valid JSON"));
  write_file(folder.file("broken.json"), R"({"lr": )");
  EXPECT_THAT(error_of([&] { parse({"--config", folder.file("broken.json")}); }), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of([&] { parse({"--config", folder.file("absent.json")}); }), HasSubstr("cannot read config"));
}

TEST(TrainConfig, AKeyGivenTwiceInAConfigFileIsRefusedByName) {
  TemporaryFolder folder;
  write_file(folder.file("config.json"), R"({"lr": 0.01, "steps": 5, "lr": 0.02})");
  TrainConfig config;
  EXPECT_THAT(
      error_of([&] { apply_config_file(config, folder.file("config.json")); }), HasSubstr("gives the key 'lr' twice"));
  write_file(folder.file("nested.json"), R"({"a": {"x": 1}, "b": {"x": 2}})");  // one per object is fine
  std::ifstream in(folder.file("nested.json"));
  EXPECT_EQ(parse_json_file(in, "test")["b"]["x"], 2);
}

TEST(TrainConfig, ThreadsAndBatchSizeBeyondTheMachineAreRefused) {
  TrainConfig config;
  config.threads = 100000;
  EXPECT_THAT(error_of([&] { config.check(); }), HasSubstr("'threads' must be in [0, "));
  config.threads = 0;
  config.batch_size = 100000000;
  EXPECT_THAT(error_of([&] { config.check(); }), HasSubstr("'batch_size' 100000000"));
}

TEST(TrainConfig, DashKeysThatDifferFromTheDefaultsAreListed) {
  auto options = dash_train_defaults();
  EXPECT_TRUE(changed_dash_keys(options).empty());
  options.block_size(64).newton_schulz_steps(3);
  EXPECT_EQ(changed_dash_keys(options), (std::vector<std::string>{"block_size", "newton_schulz_steps"}));
}

// With spectral descent, dash-train follows Muon's recipe: the hidden matrices in
// one group, the embedding, output layer and 1-D parameters on Adam at adamw_lr.
TEST(TrainConfig, SpectralDescentKeepsTheEmbeddingOutputAndVectorsOnAdamW) {
  TrainConfig config;
  config.optimizer = "dash";
  config.dash.preconditioner(dash::PreconditionerType::SpectralDescent);
  config.dash.grafting(dash::GraftingType::None).bias_correction(false);  // Muon's arithmetic
  config.lr = 0.02;
  config.adamw_lr = 3e-4;
  Llama model(config.model());
  const auto params = model->parameters();
  const auto auxiliary = model->auxiliary_matrices();
  ASSERT_EQ(std::count(auxiliary.begin(), auxiliary.end(), true), 2) << "the embedding and the output layer";
  auto optimizer = make_optimizer(config, params, nullptr, auxiliary);
  auto& groups = optimizer->param_groups();
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& param : groups[0].params()) EXPECT_EQ(param.dim(), 2);
  size_t vectors = 0;
  for (const auto& param : params) vectors += param.dim() < 2 ? 1 : 0;
  EXPECT_EQ(groups[1].params().size(), vectors + 2);
  EXPECT_EQ(groups[0].params().size() + groups[1].params().size(), params.size());
  const auto& hidden = static_cast<const dash::DashOptions&>(groups[0].options());
  const auto& adamw = static_cast<const dash::DashOptions&>(groups[1].options());
  EXPECT_EQ(hidden.start_step(), config.dash.start_step());
  EXPECT_GT(adamw.start_step(), int64_t{1} << 40) << "Adam's direction for good";
  EXPECT_EQ(adamw.grafting(), dash::GraftingType::Adam);
  EXPECT_TRUE(adamw.bias_correction());
  EXPECT_EQ(hidden.grafting(), dash::GraftingType::None);
  set_learning_rate(*optimizer, 0.01, learning_rate_scales(config, *optimizer));
  EXPECT_DOUBLE_EQ(hidden.lr(), 0.01);
  EXPECT_DOUBLE_EQ(adamw.lr(), 0.01 * 3e-4 / 0.02);
  config.dash.preconditioner(dash::PreconditionerType::Shampoo);  // Shampoo: one group, as before
  EXPECT_EQ(make_optimizer(config, params, nullptr, auxiliary)->param_groups().size(), 1u);
}

TEST(TrainConfig, HelpIsHonouredAnywhere) {
  for (const auto& arguments : std::vector<std::vector<std::string>>{
           {"-h"}, {"--help"}, {"compare", "-h"}, {"--lr", "-1", "--help"}, {"help"}}) {
    EXPECT_EQ(parse(arguments).command, "help") << arguments.front();
  }
}

TEST(TrainConfig, CompareTakesSeedsAndAnLrGrid) {
  const auto line = parse({"compare", "--seeds", "1,2,3", "--lrs", "1e-3,3e-3", "--steps", "10"});
  EXPECT_EQ(line.command, "compare");
  EXPECT_EQ(line.seeds, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(line.lrs, (std::vector<double>{1e-3, 3e-3}));
  EXPECT_EQ(line.config.out_dir, "results/compare");
  EXPECT_THAT(error_of([&] { parse({"compare", "--seeds", "1,x"}); }), HasSubstr("--seeds expects"));
}

TEST(LearningRateSchedule, WarmsUpLinearlyThenFollowsACosineToTheFloor) {
  TrainConfig config;
  config.lr = 1.0;
  config.steps = 110;
  config.warmup_steps = 10;
  config.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(scheduled_lr(config, 0), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(config, 9), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(config, 10), 1.0);
  // Halfway through the decay the cosine is at its midpoint.
  const double middle = 10 + 99 / 2.0;
  const double expected_middle = 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * (middle - 10) / 99));
  EXPECT_NEAR(scheduled_lr(config, static_cast<int64_t>(middle)), expected_middle, 0.02);
  EXPECT_DOUBLE_EQ(scheduled_lr(config, 109), 0.1);
  for (int64_t step = 11; step < 110; ++step) EXPECT_LT(scheduled_lr(config, step), scheduled_lr(config, step - 1));
}

}  // namespace
}  // namespace dash_train
