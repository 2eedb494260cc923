#include "model_shapes.h"

#include "common/physical_memory.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace dash::bench {

int64_t ModelShapes::numel() const {
  int64_t total = 0;
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (auto size : shape) n *= size;
    total += n;
  }
  return total;
}

ModelShapes llama(const std::string& name, int64_t d, int64_t layers, int64_t hidden, int64_t vocab) {
  ModelShapes model{name, {}};
  model.shapes.push_back({vocab, d});  // token embedding
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (int i = 0; i < 4; ++i) model.shapes.push_back({d, d});  // q, k, v, o
    model.shapes.push_back({hidden, d});                         // gate
    model.shapes.push_back({hidden, d});                         // up
    model.shapes.push_back({d, hidden});                         // down
    model.shapes.push_back({d});                                 // attention norm
    model.shapes.push_back({d});                                 // MLP norm
  }
  model.shapes.push_back({d});         // final norm
  model.shapes.push_back({vocab, d});  // output layer (untied)
  return model;
}

ModelShapes preset_model(const std::string& name, int64_t layers) {
  if (name == "llama-953m") return llama(name, 2048, layers >= 0 ? layers : 16, 5632, 32000);
  if (name == "llama-tiny") return llama(name, 512, layers >= 0 ? layers : 4, 1408, 8192);
  if (name == "smoke") return llama(name, 16, layers >= 0 ? layers : 1, 24, 40);
  throw std::invalid_argument("unknown --preset '" + name + "'; valid: llama-953m, llama-tiny, smoke");
}

ModelShapes parse_shapes(const std::string& list) {
  ModelShapes model{"custom", {}};
  std::stringstream shapes(list);
  for (std::string shape; std::getline(shapes, shape, ',');) {
    if (shape.empty()) throw std::invalid_argument("empty shape in --shapes '" + list + "' (two commas in a row?)");
    std::vector<int64_t> sizes;
    std::stringstream dims(shape);
    for (std::string dim; std::getline(dims, dim, 'x');) {
      size_t used = 0;
      long long value = -1;
      try {
        value = std::stoll(dim, &used);
      } catch (const std::exception&) {
      }
      if (value < 1 || used != dim.size()) throw std::invalid_argument("bad shape '" + shape + "' in --shapes");
      sizes.push_back(value);
    }
    model.shapes.push_back(sizes);
  }
  if (model.shapes.empty()) throw std::invalid_argument("--shapes is empty");
  return model;
}

void check_model_fits(const ModelShapes& model, const at::Device& device) {
  if (!device.is_cpu()) return;  // (a GPU's allocator names its own limit)
  double elements = 0.0;         // in double: a product of huge sizes overflows int64
  for (const auto& shape : model.shapes) {
    double n = 1.0;
    for (auto size : shape) n *= static_cast<double>(size);
    elements += n;
  }
  const double needed = 8.0 * elements;  // float32 parameters and gradients
  const double available = common::physical_memory_bytes();
  if (available > 0.0 && needed > available) {
    std::ostringstream message;
    message << std::setprecision(3) << "the model '" << model.name << "' has " << elements / 1e6
            << " M parameters, whose float32 values and gradients alone need " << needed / 1e9
            << " GB; this machine has " << available / 1e9 << " GB";
    throw std::invalid_argument(message.str());
  }
}

std::vector<at::Tensor> model_parameters(const ModelShapes& model, const at::Device& device, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> params;
  for (const auto& shape : model.shapes) {
    auto p = (at::randn(shape, generator) * 0.02).to(device).set_requires_grad(true);
    p.mutable_grad() = at::randn(shape, generator).to(device);
    params.push_back(p);
  }
  return params;
}

}  // namespace dash::bench
