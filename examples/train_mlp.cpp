// A small MLP fitted with dash::Dash: the whole API in one place.
#include <dash/dash.h>
#include <torch/torch.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto x = torch::randn({512, 32});
  auto y = torch::sin(x.matmul(torch::randn({32, 4})));  // a smooth target

  torch::nn::Sequential model(torch::nn::Linear(32, 64), torch::nn::GELU(), torch::nn::Linear(64, 4));

  dash::Dash optimizer(model->parameters(),
      dash::DashOptions(3e-3)
          .block_size(32)     // 64×32 and 4×64 weights → ragged-free 32×32 and 4×32 blocks
          .root_frequency(5)  // recompute L^{-1/4}, R^{-1/4} every 5 steps …
          .start_step(5)      // … starting at step 5 (Adam-grafted steps before)
          .root(dash::InverseRootOptions()
                    .method(dash::RootMethod::NewtonDB)
                    .scaling(dash::SpectralScaleOptions().method(dash::Scaling::MultiPowerIteration)))
          .weight_decay(1e-4));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/100, /*gamma=*/0.5);

  double first = 0.0, last = 0.0;
  for (int step = 0; step < 300; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    scheduler.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << last << "\n";
  }
  std::cout << "loss " << first << " -> " << last << "\n";
  torch::save(optimizer, "dash-example-optimizer.pt");  // full state, resumable with torch::load
  return last < 0.1 * first ? 0 : 1;                    // exit status: did it train?
}
