#pragma once

// The one collective of a distributed step (spec §6): every rank contributes the
// updates of the flat-buffer positions it owns, and every rank receives all of
// them. One all-gather of one padded buffer per step, not one call per parameter.

#include <dash/distributed.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash::distributed {

class UpdateExchange {
 public:
  /// positions[r]: the flat-buffer positions rank r owns (owned_positions()).
  UpdateExchange(const DistributedContext& context, const std::vector<std::vector<int64_t>>& positions,
      int64_t flat_numel, const at::Device& device);

  /// `flat_update` (float32, flat_numel + 1 elements; the last is scratch for padding) holds
  /// this rank's updates at its positions; afterwards it holds every rank's.
  void exchange(at::Tensor& flat_update);

  /// Bytes this rank sends plus receives per exchange.
  int64_t bytes_per_step() const;

  /// Bytes of the buffers it keeps (indices, send and receive buffers, staging).
  int64_t buffer_bytes() const;

 private:
  const DistributedContext& context_;
  at::Tensor send_index_;     ///< this rank's positions, padded with the scratch position
  at::Tensor receive_index_;  ///< all ranks' positions in rank order, padded likewise
  // The buffers are int32 words viewed as the communication dtype: an all-gather
  // only copies bits, and every backend moves int32 (Gloo in LibTorch 1.13 has no
  // bfloat16).
  at::Tensor send_words_;                  ///< (max_count · element / 4,) int32
  std::vector<at::Tensor> receive_words_;  ///< one slice of receive_words_all_ per rank
  at::Tensor receive_words_all_;
  at::Tensor send_values_;     ///< send_words_ viewed as the communication dtype
  at::Tensor receive_values_;  ///< receive_words_all_ viewed likewise
  // 16-bit exchange only: float32 staging, allocated once, so that a step allocates nothing.
  at::Tensor send_staging_;
  at::Tensor receive_staging_;
};

}  // namespace dash::distributed
