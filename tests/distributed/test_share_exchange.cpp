// ShareExchange, the collectives of a distributed step, between two ranks run as
// threads of this process (Gloo over loopback, meeting at an in-memory store):
// every rank ends with every rank's updates, 16-bit exchange rounds exactly as a
// cast does, the gradients of a share are the ranks' average, the decision's
// maximum (distributed/rank_maximum.h) counts NaN as +inf, and the byte count is
// the padded buffers'.

#include "distributed/share_exchange.h"

#include "distributed/rank_maximum.h"

#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/gloo_threads.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

namespace dash::distributed {
namespace {

constexpr int64_t kShare = 5;  // floats per rank: 3 bf16 words (6 halves) when 16-bit

void on_two_ranks(DistributedOptions options, const std::function<void(int64_t, DistributedContext&)>& body) {
  dash::testing::on_gloo_ranks(2, options, body);
}

// Rank r's updates: distinct values that float16 and bfloat16 round.
at::Tensor updates_of_rank(int64_t rank) {
  return 1.0 + 0.1234567 * at::arange(kShare, at::kFloat) + 10.0 * static_cast<double>(rank);
}

// The library makes Gloo groups exactly where this LibTorch has Gloo's headers.
TEST(ShareExchange, GlooGroupsAreAvailableWhereGlooHeadersAre) {
#if __has_include(<gloo/algorithm.h>)
  EXPECT_TRUE(gloo_available());
#else
  EXPECT_FALSE(gloo_available());
  EXPECT_THAT(testing::error_of([] { make_gloo_process_group(c10::make_intrusive<c10d::HashStore>(), 0, 1); }),
      ::testing::HasSubstr("no Gloo headers"));
#endif
}

TEST(ShareExchange, EveryRankReceivesEveryRanksUpdates) {
  DASH_SKIP_WITHOUT_GLOO();
  std::vector<std::vector<at::Tensor>> received(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    ShareExchange exchange(context, kShare, false, at::kCPU);
    exchange.set_round_numel(kShare);
    exchange.own_updates().copy_(updates_of_rank(rank));
    exchange.all_gather_updates(0, kShare);
    for (int64_t r = 0; r < 2; ++r) received[rank].push_back(exchange.updates_of(r).narrow(0, 0, kShare).clone());
  });
  for (int64_t rank = 0; rank < 2; ++rank) {
    for (int64_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(at::equal(received[rank][r], updates_of_rank(r))) << "rank " << rank << " received " << r;
    }
  }
}

TEST(ShareExchange, SixteenBitExchangeRoundsLikeACast) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto dtype : {CommunicationDtype::BF16, CommunicationDtype::FP16}) {
    const auto type = dtype == CommunicationDtype::BF16 ? at::kBFloat16 : at::kHalf;
    std::vector<at::Tensor> received(2);
    on_two_ranks(DistributedOptions().communication_dtype(dtype), [&](int64_t rank, DistributedContext& context) {
      ShareExchange exchange(context, kShare, false, at::kCPU);
      exchange.set_round_numel(kShare);
      EXPECT_EQ(exchange.own_updates().scalar_type(), type);
      exchange.own_updates().copy_(updates_of_rank(rank));
      exchange.all_gather_updates(0, kShare);
      received[rank] = exchange.updates_of(1 - rank).narrow(0, 0, kShare).to(at::kFloat);
    });
    for (int64_t rank = 0; rank < 2; ++rank) {
      const auto sent = updates_of_rank(1 - rank);
      EXPECT_TRUE(at::equal(received[rank], sent.to(type).to(at::kFloat))) << "rank " << rank;
      EXPECT_FALSE(at::equal(received[rank], sent)) << "no rounding happened";
    }
  }
}

// Row r of a rank's contributions is its gradient of rank r's share: each rank ends
// with the two ranks' rows for its share, averaged, rounded once as (a + b)/2 is.
TEST(ShareExchange, EachRankReceivesTheAverageOfItsShare) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto dtype : {CommunicationDtype::FP32, CommunicationDtype::BF16}) {
    auto contribution = [](int64_t from, int64_t to) {
      return at::randn({kShare}, at::make_generator<at::CPUGeneratorImpl>(10 * from + to), at::kFloat);
    };
    std::vector<at::Tensor> averages(2);
    on_two_ranks(DistributedOptions().communication_dtype(dtype), [&](int64_t rank, DistributedContext& context) {
      ShareExchange exchange(context, kShare, true, at::kCPU);
      exchange.set_round_numel(kShare);
      for (int64_t to = 0; to < 2; ++to) {
        exchange.gradient_contributions()[to].narrow(0, 0, kShare).copy_(contribution(rank, to));
      }
      averages[rank] = exchange.average_gradients().narrow(0, 0, kShare).clone();
    });
    for (int64_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(at::equal(averages[rank], (contribution(0, rank) + contribution(1, rank)) / 2.0)) << "rank " << rank;
    }
  }
}

// A share of 5 in rounds of 2: [0, 2), [2, 4), [4, 5); each round's ranges arrive
// whole, and the round buffers hold 2 elements per rank, not the share.
TEST(ShareExchange, UpdatesTravelInRounds) {
  DASH_SKIP_WITHOUT_GLOO();
  std::vector<at::Tensor> received(2);
  std::vector<int64_t> buffers(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    ShareExchange exchange(context, kShare, false, at::kCPU);
    exchange.set_round_numel(2);
    exchange.own_updates().copy_(updates_of_rank(rank));
    received[rank] = at::empty({kShare}, at::kFloat);
    for (int64_t begin = 0; begin < kShare; begin += 2) {
      const auto end = std::min<int64_t>(begin + 2, kShare);
      exchange.all_gather_updates(begin, end);
      received[rank].narrow(0, begin, end - begin).copy_(exchange.updates_of(1 - rank).narrow(0, 0, end - begin));
    }
    buffers[rank] = exchange.buffer_bytes();
  });
  for (int64_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(received[rank], updates_of_rank(1 - rank))) << "rank " << rank;
    EXPECT_EQ(buffers[rank], 4 * (kShare + 2 + 2 * 2)) << "own share, one round's send and receive buffers";
  }
}

// Without a share of its own (the ranks send their parameters' new values): each
// round is written into the send buffer, and only the round buffers are kept.
TEST(ShareExchange, RoundsFromTheSendBufferKeepNoShare) {
  DASH_SKIP_WITHOUT_GLOO();
  std::vector<at::Tensor> received(2);
  std::vector<int64_t> buffers(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    ShareExchange exchange(context, kShare, false, at::kCPU, /*own_share=*/false);
    exchange.set_round_numel(2);
    EXPECT_FALSE(exchange.own_updates().defined());
    received[rank] = at::empty({kShare}, at::kFloat);
    for (int64_t begin = 0; begin < kShare; begin += 2) {
      const auto count = std::min<int64_t>(2, kShare - begin);
      exchange.send_buffer().narrow(0, 0, count).copy_(updates_of_rank(rank).narrow(0, begin, count));
      exchange.all_gather_round();
      received[rank].narrow(0, begin, count).copy_(exchange.updates_of(1 - rank).narrow(0, 0, count));
    }
    buffers[rank] = exchange.buffer_bytes();
  });
  for (int64_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(received[rank], updates_of_rank(1 - rank))) << "rank " << rank;
    EXPECT_EQ(buffers[rank], 4 * (2 + 2 * 2)) << "one round's send and receive buffers";
  }
}

TEST(ShareExchange, TheDecisionIsTheMaximumOverRanksWithNanAsInfinity) {
  DASH_SKIP_WITHOUT_GLOO();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<at::Tensor> decided(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    auto mine = rank == 0 ? at::tensor({1.0, -2.0, nan}, at::kFloat) : at::tensor({3.0, -5.0, 0.0}, at::kFloat);
    take_maximum_over_ranks(context, mine);
    decided[rank] = mine;
  });
  const auto infinity = std::numeric_limits<float>::infinity();
  for (int64_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(decided[rank], at::tensor({3.0f, -2.0f, infinity}))) << decided[rank];
  }
}

// Rounds of 5 floats: 40 bytes for both ranges in the all-gather, or 6 halves, 3
// words (24 bytes); with gradients one range each way in the all-to-all.
TEST(ShareExchange, CountsThePaddedRoundsOfAllRanks) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto [dtype, bytes] : {std::pair{CommunicationDtype::FP32, 40}, std::pair{CommunicationDtype::BF16, 24}}) {
    on_two_ranks(
        DistributedOptions().communication_dtype(dtype), [&, bytes = bytes](int64_t, DistributedContext& context) {
          ShareExchange updates(context, kShare, false, at::kCPU);
          updates.set_round_numel(kShare);
          EXPECT_EQ(updates.bytes_per_round(), bytes);
          ShareExchange both(context, kShare, true, at::kCPU);
          both.set_round_numel(kShare);
          const int64_t round = dtype == CommunicationDtype::FP32 ? 5 : 6;
          EXPECT_EQ(both.bytes_per_round(), bytes + 2 * round * 4);
        });
  }
}

}  // namespace
}  // namespace dash::distributed
