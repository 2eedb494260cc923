// UpdateExchange, the one all-gather of a distributed step, between two ranks run
// as threads of this process (Gloo over loopback, meeting at an in-memory store):
// every rank ends with every rank's updates, 16-bit exchange rounds exactly as a
// cast does, padding never lands in the parameters, and the byte count is the
// padded buffer's.

#include "distributed/update_exchange.h"

#include "support/error_message.h"
#include "support/gloo_skip.h"

#include <dash/distributed.h>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace dash::distributed {
namespace {

constexpr int64_t kFlatNumel = 10;
// Rank 0 owns 3 positions, rank 1 owns 5 (unequal, so that rank 0's share is padded);
// positions 8 and 9 belong to nobody and must keep their values.
const std::vector<std::vector<int64_t>> kPositions = {{0, 4, 7}, {1, 2, 3, 5, 6}};

// Runs `body(rank, context)` on two ranks at once and rethrows the first failure.
void on_two_ranks(DistributedOptions options, const std::function<void(int64_t, DistributedContext&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> failures(2);
  std::vector<std::thread> ranks;
  for (int64_t rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        DistributedContext context(make_gloo_process_group(store, rank, 2, std::chrono::seconds(60)), options);
        body(rank, context);
      } catch (...) {
        failures[rank] = std::current_exception();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  for (auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

// Each rank's buffer: its own updates at its positions, 100 + rank elsewhere (what
// the exchange must overwrite, or, for unowned positions, leave alone).
at::Tensor updates_of(int64_t rank) {
  auto flat = at::full({kFlatNumel + 1}, 100.0 + static_cast<double>(rank), at::kFloat);
  for (auto position : kPositions[rank]) flat[position] = 1.0 + 0.1234567 * static_cast<double>(position);
  return flat;
}

// The library makes Gloo groups exactly where this LibTorch has Gloo's headers.
TEST(UpdateExchange, GlooGroupsAreAvailableWhereGlooHeadersAre) {
#if __has_include(<gloo/algorithm.h>)
  EXPECT_TRUE(gloo_available());
#else
  EXPECT_FALSE(gloo_available());
  EXPECT_THAT(testing::error_of([] { make_gloo_process_group(c10::make_intrusive<c10d::HashStore>(), 0, 1); }),
      ::testing::HasSubstr("no Gloo headers"));
#endif
}

TEST(UpdateExchange, EveryRankReceivesEveryRanksUpdates) {
  DASH_SKIP_WITHOUT_GLOO();
  std::vector<at::Tensor> results(2);
  on_two_ranks({}, [&](int64_t rank, DistributedContext& context) {
    UpdateExchange exchange(context, kPositions, kFlatNumel, at::kCPU);
    auto flat = updates_of(rank);
    exchange.exchange(flat);
    results[rank] = flat;
  });
  for (int64_t rank = 0; rank < 2; ++rank) {
    for (int64_t position = 0; position < 8; ++position) {
      EXPECT_FLOAT_EQ(results[rank][position].item<float>(), 1.0f + 0.1234567f * static_cast<float>(position))
          << "rank " << rank << ", position " << position;
    }
    EXPECT_EQ(results[rank][8].item<float>(), 100.0f + static_cast<float>(rank)) << "an unowned position changed";
    EXPECT_EQ(results[rank][9].item<float>(), 100.0f + static_cast<float>(rank)) << "an unowned position changed";
  }
}

TEST(UpdateExchange, SixteenBitExchangeRoundsLikeACast) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto dtype : {CommunicationDtype::BF16, CommunicationDtype::FP16}) {
    const auto type = dtype == CommunicationDtype::BF16 ? at::kBFloat16 : at::kHalf;
    std::vector<at::Tensor> results(2);
    on_two_ranks(DistributedOptions().communication_dtype(dtype), [&](int64_t rank, DistributedContext& context) {
      UpdateExchange exchange(context, kPositions, kFlatNumel, at::kCPU);
      auto flat = updates_of(rank);
      exchange.exchange(flat);
      exchange.exchange(flat);  // a second step reuses the staging buffers
      results[rank] = flat;
    });
    for (int64_t rank = 0; rank < 2; ++rank) {
      auto expected = updates_of(0).narrow(0, 0, 8);
      expected.narrow(0, 0, 8).index_copy_(
          0, at::tensor(kPositions[1], at::kLong), updates_of(1).index_select(0, at::tensor(kPositions[1], at::kLong)));
      EXPECT_TRUE(at::equal(results[rank].narrow(0, 0, 8), expected.to(type).to(at::kFloat))) << "rank " << rank;
      EXPECT_FALSE(at::equal(results[rank].narrow(0, 0, 8), expected)) << "no rounding happened";
    }
  }
}

// Both ranks send max(3, 5) elements rounded up to whole 32-bit words: 5 floats
// each (40 bytes for both shares), or 6 halves, 3 words (24 bytes).
TEST(UpdateExchange, CountsThePaddedBufferOfAllRanks) {
  DASH_SKIP_WITHOUT_GLOO();
  for (auto [dtype, bytes] : {std::pair{CommunicationDtype::FP32, 40}, std::pair{CommunicationDtype::BF16, 24}}) {
    on_two_ranks(
        DistributedOptions().communication_dtype(dtype), [&, bytes = bytes](int64_t, DistributedContext& context) {
          EXPECT_EQ(UpdateExchange(context, kPositions, kFlatNumel, at::kCPU).bytes_per_step(), bytes);
        });
  }
}

TEST(UpdateExchange, RejectsPositionsForAnotherNumberOfRanksAndOtherUpdateTypes) {
  DASH_SKIP_WITHOUT_GLOO();
  on_two_ranks({}, [&](int64_t, DistributedContext& context) {
    EXPECT_THAT(testing::error_of([&] {
      UpdateExchange(context, {{0, 1}}, kFlatNumel, at::kCPU);
    }),
        ::testing::HasSubstr("needs positions for each of 2 ranks"));
    UpdateExchange exchange(context, kPositions, kFlatNumel, at::kCPU);
    auto doubles = at::zeros({kFlatNumel + 1}, at::kDouble);
    EXPECT_THAT(testing::error_of([&] { exchange.exchange(doubles); }), ::testing::HasSubstr("float32 updates"));
  });
}

}  // namespace
}  // namespace dash::distributed
