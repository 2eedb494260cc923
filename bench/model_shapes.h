#pragma once

// Parameter shapes of real models, for benchmarking optimizer steps.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dash::bench {

struct ModelShapes {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;
  int64_t numel() const;
};

/// A Llama decoder: per layer q, k, v, o (d × d), SwiGLU gate and up (hidden × d),
/// down (d × hidden) and two RMSNorm gains (d); untied embedding and output
/// (vocab × d) and the final norm (d).
ModelShapes llama(const std::string& name, int64_t d, int64_t layers, int64_t hidden, int64_t vocab);

/// "llama-953m" (the paper's: d 2048, 16 layers, SwiGLU 5632, vocabulary 32000) or
/// "llama-tiny" (d 512, 4 layers, SwiGLU 1408, vocabulary 8192); `layers` ≥ 0
/// overrides the layer count.
ModelShapes preset_model(const std::string& name, int64_t layers);

/// "512x512,1408x512,512": shapes separated by commas, dimensions by 'x'.
ModelShapes parse_shapes(const std::string& list);

/// Refuses a model whose float32 parameters and gradients alone would not fit in
/// this machine's memory (for a CPU `device`), naming both sizes: before a run
/// starts, not as the allocator's error halfway through it.
void check_model_fits(const ModelShapes& model, const at::Device& device);

/// Parameters of `model`'s shapes on `device`, N(0, 0.02²), each with a fixed
/// N(0, 1) gradient; the same for the same seed in every process.
std::vector<at::Tensor> model_parameters(const ModelShapes& model, const at::Device& device, uint64_t seed);

}  // namespace dash::bench
