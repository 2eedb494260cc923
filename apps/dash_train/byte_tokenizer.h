#pragma once

// Byte-level tokenizer: token = byte value, vocabulary 256. Lossless for any input
// (UTF-8 or not), needs no trained vocabulary, and makes perplexities comparable
// across corpora only per byte — see docs/results.md.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace dash_train {

struct ByteTokenizer {
  static constexpr int64_t kVocabularySize = 256;

  /// uint8 tensor of the text's bytes, shape (text.size(),).
  static at::Tensor encode(const std::string& text);
  /// The bytes of a 1-D integer tensor of token ids in [0, 256).
  static std::string decode(const at::Tensor& tokens);
};

}  // namespace dash_train
