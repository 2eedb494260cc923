// torch::save / torch::load of the full optimizer state.

#include <dash/optimizer.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace dash {
namespace {

struct Model {
  std::vector<at::Tensor> params;
  explicit Model(uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    params = {at::randn({7, 5}, generator), at::randn({5}, generator), at::randn({2, 3, 3}, generator)};
    for (auto& p : params) p.set_requires_grad(true);
  }
};

DashOptions options() {
  return DashOptions(0.03).block_size(4).start_step(3).root_frequency(4).momentum(0.5).weight_decay(0.01)
      .one_dimensional(OneDimensional::Shampoo1D);
}

// Gradients as a pure function of the step and the parameters, so that a resumed
// run sees exactly what the uninterrupted one saw.
void run_steps(Model& model, Dash& optimizer, int first, int count) {
  for (int t = first; t < first + count; ++t) {
    auto generator = at::detail::createCPUGenerator(1000 + t);
    for (auto& p : model.params) p.mutable_grad() = p.detach() * 0.2 + at::randn(p.sizes(), generator);
    optimizer.step();
  }
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "dash_" + name + ".pt"; }

TEST(DashCheckpoint, ResumeIsBitIdentical) {
  Model uninterrupted(1);
  Dash optimizer(uninterrupted.params, options());
  run_steps(uninterrupted, optimizer, 0, 10);
  const auto optimizer_path = temp_path("optimizer");
  torch::save(optimizer, optimizer_path);
  std::vector<at::Tensor> saved_params;
  for (auto& p : uninterrupted.params) saved_params.push_back(p.detach().clone());
  run_steps(uninterrupted, optimizer, 10, 10);

  Model resumed(99);  // other initial values: everything must come from the checkpoint
  for (size_t i = 0; i < saved_params.size(); ++i) resumed.params[i].detach().copy_(saved_params[i]);
  Dash fresh(resumed.params, DashOptions(0.5));  // other options too: loaded from the file
  torch::load(fresh, optimizer_path);
  run_steps(resumed, fresh, 10, 10);
  for (size_t i = 0; i < saved_params.size(); ++i) {
    EXPECT_TRUE(at::equal(resumed.params[i], uninterrupted.params[i])) << "parameter " << i;
  }
  EXPECT_DOUBLE_EQ(static_cast<const DashOptions&>(fresh.param_groups()[0].options()).lr(), 0.03);
  std::remove(optimizer_path.c_str());
}

TEST(DashCheckpoint, OtherShapesGiveAClearErrorAndLeaveStateUnchanged) {
  Model model(2);
  Dash optimizer(model.params, options());
  run_steps(model, optimizer, 0, 3);
  const auto path = temp_path("shapes");
  torch::save(optimizer, path);

  auto other = at::randn({6, 5}).set_requires_grad(true);
  Dash mismatched({other, model.params[1], model.params[2]}, options());
  run_steps(model, optimizer, 3, 1);  // any state
  const auto before = mismatched.state_bytes();
  try {
    torch::load(mismatched, path);
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_THAT(error.what_without_backtrace(), ::testing::HasSubstr("saved for other parameters"));
  }
  EXPECT_EQ(mismatched.state_bytes(), before);
  std::remove(path.c_str());
}

TEST(DashCheckpoint, CorruptFileGivesAnErrorAndLeavesStateUnchanged) {
  Model model(3);
  Dash optimizer(model.params, options());
  run_steps(model, optimizer, 0, 5);
  const auto path = temp_path("corrupt");
  torch::save(optimizer, path);
  {  // truncate the file
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  // The state before the failed load, as the next step's result.
  Model twin(3);
  Dash twin_optimizer(twin.params, options());
  run_steps(twin, twin_optimizer, 0, 5);
  EXPECT_THROW(torch::load(optimizer, path), c10::Error);
  run_steps(model, optimizer, 5, 2);
  run_steps(twin, twin_optimizer, 5, 2);
  for (size_t i = 0; i < model.params.size(); ++i) EXPECT_TRUE(at::equal(model.params[i], twin.params[i]));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dash
