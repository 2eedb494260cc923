// The C++ half of tests/python/test_cpp_parity.py: trains the parameters that test
// builds, with the same gradients and options, through dash::Dash in C++, and writes
// the final parameters as raw float32 (in order) to OUT.
//
//   dash-parity-driver OUT ROOT_METHOD STEPS
//
// Both sides draw parameters and gradients from torch's default CPU generator seeded
// with 0, in the same order, so they see identical tensors.

#include <dash/dash.h>

#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: dash-parity-driver OUT ROOT_METHOD STEPS\n";
    return 2;
  }
  torch::manual_seed(0);
  // Keep in step with SHAPES in test_cpp_parity.py.
  const std::vector<std::vector<int64_t>> shapes = {{64, 48}, {48}, {7, 130}, {3, 5, 11}};
  std::vector<torch::Tensor> params;
  for (const auto& shape : shapes) params.push_back(torch::randn(shape).requires_grad_());
  dash::Dash optimizer(
      params, dash::DashOptions(1e-2).block_size(32).start_step(3).root_frequency(2).weight_decay(0.01).root(
                  dash::InverseRootOptions().method(dash::parse_root_method(argv[2]))));
  const int steps = std::atoi(argv[3]);
  for (int step = 0; step < steps; ++step) {
    for (auto& param : params) param.mutable_grad() = torch::randn(param.sizes());
    optimizer.step();
  }
  std::ofstream out(argv[1], std::ios::binary);
  for (const auto& param : params) {
    const auto values = param.detach().contiguous();
    out.write(reinterpret_cast<const char*>(values.data_ptr<float>()), values.numel() * sizeof(float));
  }
  return out ? 0 : 1;
}
