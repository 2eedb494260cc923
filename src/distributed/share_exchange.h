#pragma once

// The collectives of a distributed step (spec §6), over shares of equal length (the
// largest rank's, distributed/share_layout.h): one all-gather of the updates; under
// DistributionScheme::Zero before it one all-to-all of the gradients, each rank
// receiving every rank's contribution to its own share and averaging them (ZeRO-2's
// reduce-scatter: Gloo has no reduce-scatter, and an all-to-all moves the same
// bytes); and the small all-reduce by which the ranks decide a step alike.

#include <dash/distributed.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash::distributed {

class ShareExchange {
 public:
  /// `share_numel`: this rank's share. `gradients`: also keeps the buffers of
  /// average_gradients(). `own_share`: keeps own_updates(), the whole share; without
  /// it each round's range is written into send_buffer() instead. Call
  /// set_round_numel() before the first round.
  ShareExchange(const DistributedContext& context, int64_t share_numel, bool gradients, const at::Device& device,
      bool own_share = true);

  /// Makes the buffers of rounds of `round_numel` elements per rank (none when unchanged).
  void set_round_numel(int64_t round_numel);

  /// This rank's updates, in the communication dtype (rounded as they are written),
  /// to be filled before the rounds of all_gather_updates() (with own_share only).
  const at::Tensor& own_updates() const { return own_updates_; }
  /// One round: gives every rank every rank's [begin, end) of own_updates() (its own
  /// range; at most the round size); afterwards updates_of(r) holds rank r's.
  void all_gather_updates(int64_t begin, int64_t end);
  /// The next round's send buffer, (round,) in the communication dtype: this rank's
  /// range written from its start, then all_gather_round().
  const at::Tensor& send_buffer() const { return send_values_; }
  /// One round from send_buffer(); afterwards updates_of(r) holds rank r's range.
  void all_gather_round();
  /// Rank r's range of the last round, from its start (round size elements), in the
  /// communication dtype.
  at::Tensor updates_of(int64_t rank) const;

  /// (world_size, round) float32: row r is this rank's gradients of rank r's range of
  /// the round, to be filled before average_gradients().
  const at::Tensor& gradient_contributions() const { return contributions_; }
  /// Every rank's contribution to this rank's range, averaged over the ranks (one
  /// all-to-all): (round,) float32, valid until the next round.
  at::Tensor average_gradients();

  /// Bytes this rank sends plus receives per round: its range and the others' in the
  /// all-gather, and with gradients (world_size − 1) ranges each way in the all-to-all.
  /// (The decision's all-reduce, a few bytes per parameter, is not counted.)
  int64_t bytes_per_round() const;
  /// Bytes of the buffers it keeps: this rank's share and the round buffers.
  int64_t buffer_bytes() const;

 private:
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const;

  const DistributedContext& context_;
  at::ScalarType dtype_;
  at::Device device_;
  bool gradients_ = false;
  at::Tensor own_updates_;  ///< (share,) in the communication dtype; undefined without own_share
  int64_t round_ = 0;       ///< elements per rank per round, padded to whole 32-bit words
  // The round buffers are int32 words viewed as the communication dtype: an
  // all-gather only copies bits, and every backend moves int32 (Gloo in LibTorch
  // 1.13 has no bfloat16).
  at::Tensor send_words_;                  ///< (round · element / 4,) int32
  at::Tensor receive_words_all_;           ///< world_size of those
  std::vector<at::Tensor> receive_words_;  ///< one slice of receive_words_all_ per rank
  at::Tensor send_values_;                 ///< send_words_ viewed as the communication dtype
  at::Tensor receive_values_;              ///< receive_words_all_ viewed likewise
  // With gradients: the all-to-all's input (receive_words_all_ itself where the
  // updates are float32: it is free until the all-gather) and output, and the
  // average (send_values_ where float32).
  at::Tensor contributions_;
  at::Tensor received_;
  at::Tensor average_;
  std::vector<at::Tensor> round_buffers_;  ///< what buffer_bytes() counts besides own_updates_
};

}  // namespace dash::distributed
