// ShareExchange, the collectives of a distributed step, between two ranks run as
// threads of this process (Gloo over loopback, meeting at an in-memory store):
// every rank ends with every rank's updates, 16-bit exchange rounds exactly as a
// cast does, the gradients of a share are the ranks' average, the decision's
// maximum counts NaN as +inf, and the byte count is the padded buffers'.

#include "distributed/share_exchange.h"

#include "support/error_message.h"
#include "support/gloo_skip.h"
#include "support/gloo_threads.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

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
    exchange.own_updates().narrow(0, 0, kShare).copy_(updates_of_rank(rank));
    exchange.all_gather_updates();
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
      EXPECT_EQ(exchange.own_updates().scalar_type(), type);
      exchange.own_updates().narrow(0, 0, kShare).copy_(updates_of_rank(rank));
      exchange.all_gather_updates();
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

TEST(ShareExchange, TheDecisionIsTheMaximumOverRanksWithNanAsInfinity) {
  DASH_SKIP_WITHOUT_GLOO();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<at::Tensor> decided(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    ShareExchange exchange(context, kShare, false, at::kCPU);
    const auto mine = rank == 0 ? at::tensor({1.0, -2.0, nan}, at::kFloat) : at::tensor({3.0, -5.0, 0.0}, at::kFloat);
    decided[rank] = exchange.maximum(mine);
  });
  const auto infinity = std::numeric_limits<float>::infinity();
  for (int64_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(decided[rank], at::tensor({3.0f, -2.0f, infinity}))) << decided[rank];
  }
}

// Both ranks send 5 floats (40 bytes for both shares in the all-gather), or 6
// halves, 3 words (24 bytes); Zero adds one share each way in the all-to-all.
TEST(ShareExchange, CountsThePaddedBuffersOfAllRanks) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto [dtype, bytes] : {std::pair{CommunicationDtype::FP32, 40}, std::pair{CommunicationDtype::BF16, 24}}) {
    on_two_ranks(
        DistributedOptions().communication_dtype(dtype), [&, bytes = bytes](int64_t, DistributedContext& context) {
          EXPECT_EQ(ShareExchange(context, kShare, false, at::kCPU).bytes_per_step(), bytes);
          const int64_t share = dtype == CommunicationDtype::FP32 ? 5 : 6;
          EXPECT_EQ(ShareExchange(context, kShare, true, at::kCPU).bytes_per_step(), bytes + 2 * share * 4);
        });
  }
}

}  // namespace
}  // namespace dash::distributed
