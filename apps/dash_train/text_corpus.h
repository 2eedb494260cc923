#pragma once

// Text for training: one file or a folder of files, split deterministically into
// train and validation and tokenised byte-level.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace dash_train {

/// The default corpus: the reStructuredText sources of the Python 3.11 manual
/// (Debian package python3.11-doc, installed by scripts/setup.sh), ~12 MB of English.
inline constexpr const char* kDefaultCorpusPath = "/usr/share/doc/python3.11/html/_sources";

struct TextCorpus {
  at::Tensor train;       ///< uint8 tokens, the training documents concatenated
  at::Tensor validation;  ///< uint8 tokens, the validation documents concatenated
  int64_t train_documents = 0;
  int64_t validation_documents = 0;
};

/// Which split a document belongs to: a pure function of its path relative to the
/// corpus root (FNV-1a hash), so the split is the same on every machine and adding a
/// file does not move the others.
bool is_validation_document(const std::string& relative_path, double validation_fraction);

/// Loads `path`. A folder: every regular file under it, in sorted path order, each
/// whole file going to train or validation by is_validation_document (at least one
/// each). A single file: its last `validation_fraction` of bytes is the validation
/// split. Errors name the path for a missing path, an empty corpus, or a split that
/// is too short for one `min_split_tokens` window.
TextCorpus load_text_corpus(const std::string& path, double validation_fraction, int64_t min_split_tokens);

}  // namespace dash_train
