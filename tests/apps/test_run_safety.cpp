// dash-train's promises about the files a run owns (docs/reliability.md): run
// folders stay inside out_dir, one process per folder, no run replaced without
// --overwrite, nothing rewritten by resuming a finished run, checkpoints that
// survive a full disk and reveal overwritten bytes, clear errors naming the file.

#include "apps/train_test_support.h"
#include "compare.h"
#include "file_io.h"
#include "run_folder.h"
#include "run_log.h"
#include "support/error_message.h"
#include "text_corpus.h"
#include "trainer.h"
#include "training_checkpoint.h"
#include "optimizer_factory.h"
#include "llama.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dash_train {
namespace {

using dash::testing::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TemporaryFolder;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class RunSafety : public ::testing::Test {
 protected:
  RunSafety() {
    testing::write_file(data_.file("corpus.txt"), testing::synthetic_text(800, 3));
    corpus_ = load_text_corpus(data_.file("corpus.txt"), 0.1, 33);
  }
  TrainConfig config() const {
    auto config = testing::tiny_config(data_.file("corpus.txt"), out_.path());
    config.steps = 4;
    config.eval_every = 2;
    config.log_every = 1;
    return config;
  }
  TemporaryFolder data_, out_;
  TextCorpus corpus_;
};

TEST(RunNames, MustBeOneFolderInsideOutDir) {
  TrainConfig config;
  for (const char* name : {"..", ".", "", "a/b", "../escape", "a\nb", "tab\there"}) {
    config.name = name;
    EXPECT_THAT(error_of([&] { config.check(); }), HasSubstr("'name' must be a single folder name")) << name;
  }
  config.name = "run";
  config.out_dir = "";
  EXPECT_THAT(error_of([&] { config.check(); }), HasSubstr("'out_dir' must not be empty"));
  config.out_dir = "results";
  config.resume = config.overwrite = true;
  EXPECT_THAT(error_of([&] { config.check(); }), HasSubstr("exclude each other"));
}

TEST(RunFolders, ASecondHolderIsRefusedUntilTheFirstLetsGo) {
  TemporaryFolder out;
  const auto folder = out.file("run");
  {
    RunFolder first(folder, FolderUse::New);
    EXPECT_THAT(error_of([&] { RunFolder second(folder, FolderUse::Overwrite); }),
        AllOf(HasSubstr("in use by another dash-train process"), HasSubstr(folder)));
  }
  EXPECT_NO_THROW(RunFolder again(folder, FolderUse::New));
}

TEST(RunFolders, ARunIsReplacedOnlyWithOverwrite) {
  TemporaryFolder out;
  const auto folder = out.file("run");
  testing::write_file(folder + "/train.csv", "step,loss\n1,2.0\n");
  testing::write_file(folder + "/checkpoint-rank1.pt", "x");
  testing::write_file(folder + "/notes.txt", "mine");
  EXPECT_THAT(error_of([&] { RunFolder folder_use(folder, FolderUse::New); }),
      AllOf(HasSubstr("already holds a run"), HasSubstr("--overwrite"), HasSubstr("--resume")));
  EXPECT_EQ(contents(folder + "/train.csv"), "step,loss\n1,2.0\n");
  EXPECT_THAT(error_of([&] { RunFolder folder_use(folder, FolderUse::Resume); }), HasSubstr("no checkpoint"));
  { RunFolder replaced(folder, FolderUse::Overwrite); }
  EXPECT_FALSE(std::filesystem::exists(folder + "/train.csv"));
  EXPECT_FALSE(std::filesystem::exists(folder + "/checkpoint-rank1.pt"));
  EXPECT_EQ(contents(folder + "/notes.txt"), "mine");  // not a file of the run
}

TEST_F(RunSafety, ANewRunUnderAnExistingNameLeavesTheOldRunAlone) {
  Trainer(config(), corpus_).run();
  const auto log = contents(out_.file("run/train.csv"));
  EXPECT_THAT(error_of([&] { Trainer(config(), corpus_); }), HasSubstr("already holds a run"));
  EXPECT_EQ(contents(out_.file("run/train.csv")), log);
  auto overwrite = config();
  overwrite.overwrite = true;
  overwrite.steps = 2;
  EXPECT_TRUE(Trainer(overwrite, corpus_).run().finished);
  EXPECT_NE(contents(out_.file("run/train.csv")), log);
}

TEST_F(RunSafety, ResumingAFinishedRunRewritesNothing) {
  const auto finished = Trainer(config(), corpus_).run();
  const auto summary = contents(out_.file("run/summary.json"));
  const auto log = contents(out_.file("run/train.csv"));
  auto resume = config();
  resume.resume = true;
  const auto again = Trainer(resume, corpus_).run();
  EXPECT_EQ(contents(out_.file("run/summary.json")), summary);
  EXPECT_EQ(contents(out_.file("run/train.csv")), log);
  EXPECT_TRUE(again.finished);
  EXPECT_EQ(again.final_validation_loss, finished.final_validation_loss);
  EXPECT_EQ(again.optimizer_ms, finished.optimizer_ms);  // the recorded timings, not zeros
  EXPECT_GT(again.optimizer_ms, 0.0);
}

TEST_F(RunSafety, OverwrittenCheckpointBytesAreAClearError) {
  auto interrupted = config();
  interrupted.stop_at = 2;
  Trainer(interrupted, corpus_).run();
  const auto path = out_.file("run/checkpoint.pt");
  auto bytes = contents(path);
  for (size_t i = 0; i < 8; ++i) bytes[bytes.size() / 2 + i] ^= 0x5A;
  testing::write_file(path, bytes);
  auto resume = config();
  resume.resume = true;
  EXPECT_THAT(error_of([&] { Trainer(resume, corpus_); }), AllOf(HasSubstr(path), HasSubstr("corrupt")));
}

// A full disk, simulated by a file-size limit (writes past it fail with EFBIG,
// as with ENOSPC): the checkpoint write is an error naming the file, the last good
// checkpoint still loads, and no temporary file stays behind.
TEST_F(RunSafety, AFullDiskKeepsTheLastGoodCheckpoint) {
  auto run = config();
  run.checkpoint_every = 2;
  run.stop_at = 2;
  Trainer(run, corpus_).run();
  const auto path = out_.file("run/checkpoint.pt");
  const auto good = contents(path);

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 64 * 1024;  // below the checkpoint's size
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  {
    run.stop_at = 0;
    run.resume = true;
    Trainer resumed(run, corpus_);
    error = error_of([&] { resumed.run(); });
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_THAT(error, AllOf(HasSubstr("cannot write '" + path + "'"), HasSubstr("unchanged")));
  EXPECT_EQ(contents(path), good);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  Trainer(run, corpus_);  // loads
}

TEST(RunLogs, AFailedWriteNamesTheLog) {
  EXPECT_THAT(error_of([&] {
    CsvLog log("/dev/full", {"step", "loss"}, -1);
  }),
      AllOf(HasSubstr("cannot write log file '/dev/full'"), HasSubstr("No space left on device")));
}

TEST(RunLogs, AForeignLogIsAnErrorNotAStoll) {
  TemporaryFolder out;
  testing::write_file(out.file("train.csv"), "step,loss\nnot-a-step,1.0\n");
  EXPECT_THAT(error_of([&] {
    CsvLog log(out.file("train.csv"), {"step", "loss"}, 3);
  }),
      AllOf(HasSubstr(out.file("train.csv")), HasSubstr("line 2")));
}

// A log cut inside a row (a crash, a full disk, an edit) loses that row on resume,
// not the rows written after it, which would otherwise be glued to it.
TEST(RunLogs, ARowCutShortIsDroppedOnResume) {
  TemporaryFolder out;
  for (const char* cut : {"step,loss\n1,0.5\n2,0.", "step,loss\n1,0.5\n2\n"}) {
    testing::write_file(out.file("train.csv"), cut);
    {
      CsvLog log(out.file("train.csv"), {"step", "loss"}, 3);
      log.write({"3", "0.25"});
    }
    EXPECT_EQ(contents(out.file("train.csv")), "step,loss\n1,0.5\n3,0.25\n") << cut;
  }
}

TEST(RunFolders, ResumingAFolderInUseSaysSoEvenBeforeItsFirstCheckpoint) {
  TemporaryFolder out;
  const RunFolder first(out.file("run"), FolderUse::New);
  EXPECT_THAT(error_of([&] { check_run_folder(out.file("run"), FolderUse::Resume); }), HasSubstr("is in use"));
}

TEST_F(RunSafety, AResumeOnAnotherNumberOfRanksNamesTheRanks) {
  auto written = config();
  written.stop_at = 2;
  written.checkpoint_every = 2;
  Trainer(written, corpus_).run();
  // As a rank of 2 saved it: the world size the checkpoint records.
  auto model = Llama(written.model());
  auto optimizer = make_optimizer(written, model->parameters());
  const auto path = written.run_dir() + "/checkpoint.pt";
  auto progress = load_training_checkpoint(path, written, *model, *optimizer, 1);
  progress.world_size = 2;
  save_training_checkpoint(path, written, progress, *model, *optimizer);
  EXPECT_THAT(error_of([&] { load_training_checkpoint(path, written, *model, *optimizer, 1); }),
      AllOf(HasSubstr("written by a run on 2 ranks"), HasSubstr("resume it with --nproc 2")));
}

TEST_F(RunSafety, CompareChecksEveryRunBeforeStartingTheFirst) {
  CompareOptions options;
  options.base = config();
  options.seeds = {1};
  options.runs = nlohmann::json::parse(R"([{"name": "a", "optimizer": "adamw"},
                                           {"name": "a", "optimizer": "dash"}])");
  EXPECT_THAT(error_of([&] { run_comparison(options); }), HasSubstr("two runs would write to"));
  options.runs = nlohmann::json::parse(R"([{"name": "a", "optimizer": "adamw"},
                                           {"name": "b", "optimizer": "dash", "newton_steps": 0}])");
  EXPECT_THAT(error_of([&] { run_comparison(options); }), AllOf(HasSubstr("run 'b'"), HasSubstr("newton_steps")));
  options.runs = nlohmann::json::parse(R"([{"name": "a", "optimizer": "adamw"}, {"name": "b", "optimizer": "adamw"}])");
  testing::write_file(out_.file("b-seed1/config.json"), "{}");
  EXPECT_THAT(error_of([&] { run_comparison(options); }), HasSubstr("already holds a run"));
  EXPECT_FALSE(std::filesystem::exists(out_.file("a-seed1")));  // nothing started
}

}  // namespace
}  // namespace dash_train
