#include "text_corpus.h"

#include "byte_tokenizer.h"
#include "file_io.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace dash_train {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  TORCH_CHECK(in, "dash-train: cannot read data file '", file.string(), "'");
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void check_split_length(const at::Tensor& tokens, const char* split, const std::string& path, int64_t min_tokens) {
  TORCH_CHECK(tokens.numel() >= min_tokens, "dash-train: the ", split, " split of '", path, "' has ", tokens.numel(),
      " bytes, fewer than one training window (", min_tokens,
      "); use more text, a shorter seq_len, or another validation_fraction");
}

TextCorpus split_single_file(const std::string& text, double validation_fraction) {
  const auto size = static_cast<int64_t>(text.size());
  const auto validation_bytes = static_cast<int64_t>(static_cast<double>(size) * validation_fraction);
  TextCorpus corpus;
  corpus.train = ByteTokenizer::encode(text.substr(0, static_cast<size_t>(size - validation_bytes)));
  corpus.validation = ByteTokenizer::encode(text.substr(static_cast<size_t>(size - validation_bytes)));
  corpus.train_documents = corpus.validation_documents = 1;
  return corpus;
}

TextCorpus split_folder(const fs::path& root, double validation_fraction) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::string train_text;
  std::string validation_text;
  TextCorpus corpus;
  for (const auto& file : files) {
    const auto relative = fs::relative(file, root).generic_string();
    auto text = read_file(file);
    if (text.empty()) continue;
    if (is_validation_document(relative, validation_fraction)) {
      validation_text += text;
      ++corpus.validation_documents;
    } else {
      train_text += text;
      ++corpus.train_documents;
    }
  }
  TORCH_CHECK(corpus.train_documents + corpus.validation_documents > 0, "dash-train: data folder '", root.string(),
      "' holds no non-empty file");
  TORCH_CHECK(corpus.train_documents > 0 && corpus.validation_documents > 0, "dash-train: data folder '", root.string(),
      "' has ", corpus.train_documents, " training and ", corpus.validation_documents,
      " validation documents at validation_fraction ", validation_fraction,
      "; both splits need at least one (use more files or another fraction)");
  corpus.train = ByteTokenizer::encode(train_text);
  corpus.validation = ByteTokenizer::encode(validation_text);
  return corpus;
}

}  // namespace

bool is_validation_document(const std::string& relative_path, double validation_fraction) {
  constexpr uint64_t kBuckets = 1000000;
  return static_cast<double>(fnv1a(relative_path) % kBuckets) < validation_fraction * static_cast<double>(kBuckets);
}

TextCorpus load_text_corpus(const std::string& path, double validation_fraction, int64_t min_split_tokens) {
  TORCH_CHECK(validation_fraction > 0.0 && validation_fraction < 1.0,
      "dash-train: validation_fraction must be in (0, 1), got ", validation_fraction);
  std::error_code error;
  const fs::path root(path);
  TORCH_CHECK(fs::exists(root, error), "dash-train: data path '", path,
      "' does not exist (the default corpus comes with Debian's python3.11-doc: run scripts/setup.sh)");
  // A device (/dev/zero) never ends and a pipe may never be written to: only
  // regular files (directly or in a folder) are read.
  TORCH_CHECK(fs::is_directory(root, error) || fs::is_regular_file(root, error), "dash-train: data path '", path,
      "' is not a regular file or a folder (a device, pipe or socket cannot be split into train and "
      "validation text)");
  TextCorpus corpus;
  if (fs::is_directory(root)) {
    corpus = split_folder(root, validation_fraction);
  } else {
    const auto text = read_file(root);
    TORCH_CHECK(!text.empty(), "dash-train: data file '", path, "' is empty");
    corpus = split_single_file(text, validation_fraction);
  }
  check_split_length(corpus.train, "training", path, min_split_tokens);
  check_split_length(corpus.validation, "validation", path, min_split_tokens);
  return corpus;
}

}  // namespace dash_train
