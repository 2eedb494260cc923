// The one list of state-shaping options (optim/dash_options.h): what a group may
// not change once its state exists, and the per-group signature that checkpoints
// store and ranks compare.

#include "optim/dash_options.h"

#include "support/solver_options.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dash::optim {
namespace {

std::vector<torch::optim::OptimizerParamGroup> one_group(const DashOptions& options) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      std::vector<at::Tensor>{at::zeros({7, 5}), at::zeros({5})}, std::make_unique<DashOptions>(options));
  return groups;
}

// Checkpoints hold this exact text under "dash.signature" (and those of format 1,
// without the family, under "dash.layout": before_families), so a change of format
// would make every earlier checkpoint fail to load.
TEST(StateShapingOptions, SignatureKeepsTheCheckpointFormat) {
  const auto options = DashOptions()
                           .block_size(4)
                           .momentum(0.5)
                           .one_dimensional(OneDimensional::Shampoo1D)
                           .grafting(GraftingType::RMSprop)
                           .exponent_override(2);
  EXPECT_EQ(groups_signature(one_group(options)), "group 0 B=4 1d=1 root=2 graft=1 momentum=1 family=0: [7, 5] [5]\n");
  EXPECT_EQ(groups_signature(one_group(DashOptions())),
      "group 0 B=1024 1d=0 root=0 graft=0 momentum=0 family=0: [7, 5] [5]\n");
  EXPECT_EQ(groups_signature(one_group(options), true, /*before_families=*/true),
      "group 0 B=4 1d=1 root=2 graft=1 momentum=1: [7, 5] [5]\n");
}

// The layout changes with what decides the state's shapes, not with every value:
// Adam and RMSprop both keep a statistic, any momentum > 0 keeps a buffer.
TEST(StateShapingOptions, LayoutFollowsTheShapesOfTheState) {
  const auto base = DashOptions().momentum(0.5);
  EXPECT_EQ(state_layout(base), state_layout(DashOptions(base).grafting(GraftingType::RMSprop)));
  EXPECT_EQ(state_layout(base), state_layout(DashOptions(base).momentum(0.9)));
  EXPECT_EQ(
      state_layout(base), state_layout(DashOptions(base).lr(0.5).root(dash::testing::solver_options(RootMethod::EVD))));
  EXPECT_NE(state_layout(base), state_layout(DashOptions(base).grafting(GraftingType::SGD)));
  EXPECT_NE(state_layout(base), state_layout(DashOptions(base).momentum(0.0)));
  EXPECT_NE(state_layout(base), state_layout(DashOptions(base).block_size(512)));
  EXPECT_NE(state_layout(base), state_layout(DashOptions(base).exponent_override(2)));
  EXPECT_NE(state_layout(base), state_layout(DashOptions(base).one_dimensional(OneDimensional::Shampoo1D)));
  // Ranks must agree on the grafting type itself, not only on its state.
  EXPECT_NE(groups_signature(one_group(base)),
      groups_signature(one_group(DashOptions(base).grafting(GraftingType::RMSprop))));
}

TEST(StateShapingOptions, MessagesNameEveryOption) {
  EXPECT_EQ(state_shaping_option_names(),
      "block_size, one_dimensional, exponent_override, grafting, momentum, preconditioner");
  EXPECT_EQ(state_layout(DashOptions().block_size(8)),
      "block_size 8, one_dimensional adamw, exponent_override 0, grafting with a statistic, momentum off, "
      "preconditioner shampoo");
}

}  // namespace
}  // namespace dash::optim
