// dash-train data: byte tokenizer, corpus split, batches.

#include "apps/train_test_support.h"
#include "byte_tokenizer.h"
#include "support/error_message.h"
#include "text_corpus.h"
#include "token_batches.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

namespace dash_train {
namespace {

using dash::testing::error_of;
using testing::synthetic_text;
using testing::TemporaryFolder;
using testing::write_file;

std::string as_string(const at::Tensor& bytes) { return ByteTokenizer::decode(bytes); }

TEST(ByteTokenizer, RoundTripsEveryByteValue) {
  std::string text;
  for (int value = 0; value < 256; ++value) text.push_back(static_cast<char>(value));
  text += "déjà vu — ∑";
  const auto tokens = ByteTokenizer::encode(text);
  ASSERT_EQ(tokens.numel(), static_cast<int64_t>(text.size()));
  EXPECT_EQ(tokens[255].item<int64_t>(), 255);
  EXPECT_EQ(ByteTokenizer::decode(tokens), text);
  EXPECT_EQ(ByteTokenizer::decode(tokens.to(at::kLong)), text);
}

TEST(ByteTokenizer, RejectsIdsOutsideTheVocabulary) {
  EXPECT_THAT(error_of([] {
    ByteTokenizer::decode(at::tensor({65, 256}, at::kLong));
  }),
      ::testing::HasSubstr("[0, 256)"));
}

TEST(TextCorpus, FolderSplitKeepsEveryDocumentWholeInExactlyOneSplit) {
  TemporaryFolder folder;
  std::string all;
  for (int i = 0; i < 40; ++i) {
    const auto text = "<doc " + std::to_string(i) + ">" + synthetic_text(3, static_cast<unsigned>(i));
    write_file(folder.file("docs/part" + std::to_string(i % 3) + "/doc" + std::to_string(i) + ".txt"), text);
    all += text;
  }
  const auto corpus = load_text_corpus(folder.path(), 0.2, 8);
  EXPECT_EQ(corpus.train_documents + corpus.validation_documents, 40);
  EXPECT_GT(corpus.validation_documents, 0);
  EXPECT_EQ(corpus.train.numel() + corpus.validation.numel(), static_cast<int64_t>(all.size()));
  const auto train = as_string(corpus.train), validation = as_string(corpus.validation);
  for (int i = 0; i < 40; ++i) {
    const auto marker = "<doc " + std::to_string(i) + ">";
    const bool in_train = train.find(marker) != std::string::npos;
    const bool in_validation = validation.find(marker) != std::string::npos;
    EXPECT_NE(in_train, in_validation) << marker;
    EXPECT_EQ(in_validation,
        is_validation_document("docs/part" + std::to_string(i % 3) + "/doc" + std::to_string(i) + ".txt", 0.2))
        << marker;
  }
  // Deterministic: loading again gives the same bytes.
  const auto again = load_text_corpus(folder.path(), 0.2, 8);
  EXPECT_TRUE(at::equal(again.train, corpus.train));
  EXPECT_TRUE(at::equal(again.validation, corpus.validation));
}

TEST(TextCorpus, ValidationShareFollowsTheFraction) {
  int validation = 0;
  for (int i = 0; i < 10000; ++i) validation += is_validation_document("doc" + std::to_string(i) + ".rst", 0.1);
  EXPECT_NEAR(validation / 10000.0, 0.1, 0.015);
}

TEST(TextCorpus, SingleFileHoldsOutItsTail) {
  TemporaryFolder folder;
  const auto text = synthetic_text(100, 7);
  write_file(folder.file("book.txt"), text);
  const auto corpus = load_text_corpus(folder.file("book.txt"), 0.25, 8);
  const auto held_out = static_cast<size_t>(static_cast<double>(text.size()) * 0.25);
  EXPECT_EQ(as_string(corpus.train), text.substr(0, text.size() - held_out));
  EXPECT_EQ(as_string(corpus.validation), text.substr(text.size() - held_out));
}

TEST(TextCorpus, BadPathsGetClearErrors) {
  TemporaryFolder folder;
  EXPECT_THAT(
      error_of([&] { load_text_corpus(folder.file("missing.txt"), 0.1, 8); }), ::testing::HasSubstr("does not exist"));
  write_file(folder.file("empty.txt"), "");
  EXPECT_THAT(error_of([&] { load_text_corpus(folder.file("empty.txt"), 0.1, 8); }), ::testing::HasSubstr("is empty"));
  TemporaryFolder empty_folder;
  EXPECT_THAT(
      error_of([&] { load_text_corpus(empty_folder.path(), 0.1, 8); }), ::testing::HasSubstr("no non-empty file"));
  write_file(folder.file("short.txt"), "tiny");
  EXPECT_THAT(error_of([&] { load_text_corpus(folder.file("short.txt"), 0.5, 8); }),
      ::testing::HasSubstr("fewer than one training window"));
  EXPECT_THAT(error_of([&] { load_text_corpus(folder.file("short.txt"), 1.5, 1); }),
      ::testing::HasSubstr("validation_fraction"));
  // /dev/zero never ends, a pipe may never be written to: refused, not read.
  EXPECT_THAT(
      error_of([&] { load_text_corpus("/dev/zero", 0.1, 8); }), ::testing::HasSubstr("not a regular file or a folder"));
  ASSERT_EQ(::mkfifo(folder.file("pipe").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { load_text_corpus(folder.file("pipe"), 0.1, 8); }),
      ::testing::HasSubstr("not a regular file or a folder"));
}

TEST(TokenBatches, TargetsAreInputsShiftedByOneAndWindowsComeFromTheText) {
  const auto text = synthetic_text(50, 3);
  const auto tokens = ByteTokenizer::encode(text);
  const auto batch = training_batch(tokens, 4, 16, /*seed=*/5, /*step=*/3);
  ASSERT_EQ(batch.inputs.sizes(), (at::IntArrayRef{4, 16}));
  ASSERT_EQ(batch.inputs.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(batch.inputs.narrow(1, 1, 15), batch.targets.narrow(1, 0, 15)));
  for (int64_t row = 0; row < 4; ++row) {
    const auto window =
        ByteTokenizer::decode(batch.inputs[row]) + ByteTokenizer::decode(batch.targets[row][15].view(1));
    EXPECT_NE(text.find(window), std::string::npos) << window;
  }
}

TEST(TokenBatches, BatchesArePureFunctionsOfSeedStepAndRank) {
  const auto tokens = ByteTokenizer::encode(synthetic_text(200, 3));
  const auto a = training_batch(tokens, 8, 16, 1, 4);
  EXPECT_TRUE(at::equal(a.inputs, training_batch(tokens, 8, 16, 1, 4).inputs));
  EXPECT_FALSE(at::equal(a.inputs, training_batch(tokens, 8, 16, 1, 5).inputs));
  EXPECT_FALSE(at::equal(a.inputs, training_batch(tokens, 8, 16, 2, 4).inputs));
}

TEST(TokenBatches, EachRankDrawsFromItsOwnShard) {
  // Shard r of 3 holds only the byte values [80 r, 80 r + 80).
  const int64_t shard = 1000;
  const auto position = at::arange(3 * shard, at::kLong);
  const auto tokens = (position.div(shard, "floor") * 80 + position % 80).to(at::kByte);
  for (int64_t rank = 0; rank < 3; ++rank) {
    for (int64_t step = 0; step < 20; ++step) {
      const auto batch = training_batch(tokens, 4, 16, 9, step, rank, 3);
      const auto values = at::cat({batch.inputs, batch.targets});
      EXPECT_GE(values.min().item<int64_t>(), 80 * rank);
      EXPECT_LT(values.max().item<int64_t>(), 80 * rank + 80);
    }
  }
  EXPECT_THAT(error_of([&] { training_batch(tokens, 4, 16, 9, 0, 3, 3); }), ::testing::HasSubstr("outside world size"));
}

TEST(TokenBatches, ValidationBatchesAreEvenlySpacedAndDeterministic) {
  const auto tokens = ByteTokenizer::encode(synthetic_text(100, 4));
  const auto batches = validation_batches(tokens, 2, 8, 3);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_TRUE(at::equal(batches[0].inputs[0], tokens.narrow(0, 0, 8).to(at::kLong)));
  EXPECT_TRUE(at::equal(batches[2].targets[1], tokens.narrow(0, tokens.numel() - 8, 8).to(at::kLong)));
  EXPECT_TRUE(at::equal(validation_batches(tokens, 2, 8, 3)[1].inputs, batches[1].inputs));
}

}  // namespace
}  // namespace dash_train
