#include "byte_tokenizer.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace dash_train {

at::Tensor ByteTokenizer::encode(const std::string& text) {
  auto tokens = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  if (!text.empty()) {
    std::memcpy(tokens.data_ptr<uint8_t>(), text.data(), text.size());
  }
  return tokens;
}

std::string ByteTokenizer::decode(const at::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 1, "ByteTokenizer::decode: expected a 1-D tensor, got ", tokens.dim(), " dimensions");
  TORCH_CHECK(!at::isFloatingType(tokens.scalar_type()) && !at::isComplexType(tokens.scalar_type()),
      "ByteTokenizer::decode: expected integer token ids, got ", tokens.scalar_type());
  if (tokens.numel() == 0) return {};
  const auto ids = tokens.to(at::kCPU, at::kLong).contiguous();
  const auto lowest = ids.min().item<int64_t>();
  const auto highest = ids.max().item<int64_t>();
  TORCH_CHECK(lowest >= 0 && highest < kVocabularySize, "ByteTokenizer::decode: token ids must be in [0, 256), got [",
      lowest, ", ", highest, "]");
  const auto bytes = ids.to(at::kByte);
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
}

}  // namespace dash_train
