// dash-train end to end: a short training run learns, resume equals an
// uninterrupted run, compare writes its table and plot.

#include "apps/train_test_support.h"
#include "compare.h"
#include "support/error_message.h"
#include "text_corpus.h"
#include "trainer.h"
#include "training_checkpoint.h"

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dash_train {
namespace {

using dash::testing::error_of;
using ::testing::HasSubstr;
using testing::TemporaryFolder;
using testing::tiny_config;

/// The loss column of a run's train.csv.
std::vector<double> logged_losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/train.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,lr,loss,tokens_per_s,forward_ms,backward_ms,optimizer_ms");
  std::vector<double> losses;
  while (std::getline(in, line)) {
    const auto first = line.find(',');
    const auto second = line.find(',', first + 1);
    losses.push_back(std::stod(line.substr(second + 1)));
  }
  return losses;
}

class TrainerTest : public ::testing::TestWithParam<std::string> {
 protected:
  TrainerTest() {
    testing::write_file(data_.file("corpus.txt"), testing::synthetic_text(3000, 11));
    corpus_ = load_text_corpus(data_.file("corpus.txt"), 0.1, 33);
  }
  TrainConfig config() const {
    auto config = tiny_config(data_.file("corpus.txt"), out_.path());
    config.optimizer = GetParam();
    return config;
  }

  TemporaryFolder data_, out_;
  TextCorpus corpus_;
};

TEST_P(TrainerTest, TwentyStepsLowerTheLoss) {
  auto config = this->config();
  config.lr = 1e-2;
  Trainer trainer(config, corpus_);
  const auto result = trainer.run();
  const auto losses = logged_losses(out_.path() + "/run");
  ASSERT_EQ(losses.size(), 20u);
  const double first = (losses[0] + losses[1]) / 2, last = (losses[18] + losses[19]) / 2;
  EXPECT_LT(last, first - 1.0) << "first " << first << " last " << last;
  EXPECT_TRUE(result.finished);
  ASSERT_EQ(result.validation.size(), 2u);  // steps 10 and 20
  EXPECT_LT(result.validation[1].loss, result.validation[0].loss);
  EXPECT_EQ(result.validation[1].tokens, 20 * config.batch_size * config.seq_len);
  EXPECT_TRUE(std::filesystem::exists(out_.path() + "/run/checkpoint.pt"));
  EXPECT_TRUE(std::filesystem::exists(out_.path() + "/run/summary.json"));
  // The failed roots the optimizer counted are on record.
  int64_t failures = 0;
  if (const auto* optimizer = dynamic_cast<const dash::Dash*>(&trainer.optimizer())) {
    for (const auto& stack : optimizer->diagnostics().factor_stacks) failures += stack.failures;
  }
  const auto summary = nlohmann::json::parse(std::ifstream(out_.path() + "/run/summary.json"));
  EXPECT_EQ(summary["root_failures"].get<int64_t>(), failures);
}

TEST_P(TrainerTest, ResumingEqualsAnUninterruptedRunBitwise) {
  auto straight = config();
  straight.name = "straight";
  Trainer uninterrupted(straight, corpus_);
  const auto expected = uninterrupted.run();

  auto interrupted = config();
  interrupted.name = "interrupted";
  interrupted.stop_at = 7;  // between two root refreshes and before the first validation
  const auto partial = Trainer(interrupted, corpus_).run();
  EXPECT_FALSE(partial.finished);
  EXPECT_EQ(partial.steps, 7);
  interrupted.stop_at = 0;
  interrupted.resume = true;
  Trainer resumed(interrupted, corpus_);
  const auto result = resumed.run();
  EXPECT_TRUE(result.finished);

  const auto a = uninterrupted.model()->named_parameters();
  const auto b = resumed.model()->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i].value(), b[i].value())) << a[i].key();
  }
  EXPECT_EQ(result.final_validation_loss, expected.final_validation_loss);
  // The resumed run's log reads as one run: 20 rows, identical losses.
  EXPECT_EQ(logged_losses(out_.path() + "/interrupted"), logged_losses(out_.path() + "/straight"));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainerTest, ::testing::Values("adamw", "dash"));

TEST(TrainerErrors, ResumeRejectsAChangedConfigAndAMissingCheckpoint) {
  TemporaryFolder data, out;
  testing::write_file(data.file("corpus.txt"), testing::synthetic_text(500, 2));
  const auto corpus = load_text_corpus(data.file("corpus.txt"), 0.1, 33);
  auto config = tiny_config(data.file("corpus.txt"), out.path());
  config.optimizer = "dash";
  config.resume = true;
  EXPECT_THAT(error_of([&] { Trainer(config, corpus); }), HasSubstr("no checkpoint"));
  config.resume = false;
  config.stop_at = 3;
  Trainer(config, corpus).run();
  config.resume = true;
  config.stop_at = 0;
  config.lr = 0.5;
  EXPECT_THAT(error_of([&] { Trainer(config, corpus); }), HasSubstr("was written with lr = 0.003"));
}

// A checkpoint's config written by an earlier dash-train: keys under their earlier
// names, an enum by an alias, keys added since absent; it resumes with the same
// values and is refused, naming the key, with another.
TEST(TrainerErrors, ACheckpointOfAnEarlierDashTrainResumesWithTheSameValues) {
  TrainConfig config;
  config.optimizer = "dash";
  config.dash.root(dash::InverseRootOptions(config.dash.root()).method(dash::RootMethod::NewtonDB).epsilon(1e-6));
  const std::string earlier =
      R"({"optimizer": "dash", "root_method": "newton-db", "root_epsilon": 1e-6, "ndb_evaluation": "auto"})";
  check_checkpoint_config(earlier, config, "old.pt");
  config.dash.root(dash::InverseRootOptions(config.dash.root()).epsilon(1e-5));
  EXPECT_THAT(error_of([&] { check_checkpoint_config(earlier, config, "old.pt"); }),
      HasSubstr("'old.pt' was written with epsilon = 1e-06"));
}

TEST(Compare, RunsEachConfigurationPerSeedAndWritesTheTableAndPlot) {
  TemporaryFolder data, out;
  testing::write_file(data.file("corpus.txt"), testing::synthetic_text(1000, 5));
  CompareOptions options;
  options.base = tiny_config(data.file("corpus.txt"), out.path());
  options.base.steps = 6;
  options.base.eval_every = 3;
  options.runs = nlohmann::json::parse(R"([{"name": "a", "optimizer": "adamw"},
                                           {"name": "d", "optimizer": "dash", "lr": 0.002, "root_method": "cn"}])");
  options.seeds = {1, 2};
  const auto rows = run_comparison(options);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "a");
  EXPECT_EQ(rows[1].lr, 0.002);
  EXPECT_EQ(rows[1].seeds, 2);
  EXPECT_GT(rows[0].loss_std, 0.0);  // two seeds differ
  EXPECT_NEAR(std::log(rows[0].perplexity_mean), rows[0].loss_mean, 0.1);
  for (const auto* run : {"a-seed1", "a-seed2", "d-seed1", "d-seed2"}) {
    EXPECT_TRUE(std::filesystem::exists(out.path() + "/" + run + "/validation.csv")) << run;
  }
  EXPECT_TRUE(std::filesystem::exists(out.path() + "/summary.md"));
  std::ifstream curves(out.path() + "/curves.dat");
  std::string contents((std::istreambuf_iterator<char>(curves)), std::istreambuf_iterator<char>());
  EXPECT_THAT(contents, HasSubstr("# d\n3 "));
  // Each curve point is "step loss seconds", and training time grows with the step.
  std::istringstream lines(contents.substr(contents.find("# d\n") + 4));
  double step3 = 0, loss3 = 0, seconds3 = 0, step6 = 0, loss6 = 0, seconds6 = 0;
  lines >> step3 >> loss3 >> seconds3 >> step6 >> loss6 >> seconds6;
  EXPECT_EQ(step3, 3);
  EXPECT_EQ(step6, 6);
  EXPECT_GT(seconds3, 0.0);
  EXPECT_GT(seconds6, seconds3);
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_GT(std::filesystem::file_size(out.path() + "/validation_loss.png"), 1000u);
    EXPECT_GT(std::filesystem::file_size(out.path() + "/validation_loss_time.png"), 1000u);
  }
  // A run may not change what all runs share.
  options.runs = nlohmann::json::parse(R"([{"name": "x", "seed": 4}])");
  EXPECT_THAT(error_of([&] { run_comparison(options); }), HasSubstr("shared by all runs"));
}

}  // namespace
}  // namespace dash_train
