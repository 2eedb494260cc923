#include "optim/parameter_checks.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

namespace dash::optim {
namespace {

// The bytes a parameter's elements span, from its first to one past its last.
struct MemorySpan {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  at::IntArrayRef shape;
};

// Two parameters in overlapping memory (overlapping or interleaved views of one
// storage) would be written by the update's write-back from several threads at once
// (kernels/matrix_transfer.h), and an optimizer that moves each parameter by its own
// update has no meaning for them anyway.
void check_disjoint_memory(std::vector<MemorySpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < spans.size(); ++k) {
    TORCH_CHECK(spans[k].begin >= spans[k - 1].end, "dash::Dash: parameters of shapes ", spans[k - 1].shape, " and ",
        spans[k].shape,
        " lie in overlapping memory (views of one storage that overlap or interleave); each "
        "parameter must have memory of its own");
  }
}

MemorySpan memory_span(const at::Tensor& param) {
  int64_t last = 0;
  for (int64_t d = 0; d < param.dim(); ++d) last += (param.size(d) - 1) * param.stride(d);
  const auto element = static_cast<uintptr_t>(param.element_size());
  const auto begin = reinterpret_cast<uintptr_t>(static_cast<const char*>(param.storage().data())) +
                     static_cast<uintptr_t>(param.storage_offset()) * element;
  return {begin, begin + (static_cast<uintptr_t>(last) + 1) * element, param.sizes()};
}

// One parameter by itself: floating point, with data, and a plain tensor.
void check_parameter(const at::Tensor& param) {
  TORCH_CHECK(param.is_floating_point(), "dash::Dash: parameters must be floating point, got ", param.scalar_type());
  // A model built on the meta device has shapes but no memory yet: the state would
  // be meta tensors too, and the first step would fail far from the cause.
  TORCH_CHECK(!param.is_meta(), "dash::Dash: a parameter of shape ", param.sizes(),
      " is on the meta device (no data); build the optimizer after the model is materialised (e.g. "
      "to_empty() and loading its weights)");
  // FSDP2's fully_shard and tensor parallelism make DTensors: subclasses whose data
  // lives in Python-side shards that no C++ view can address.
  TORCH_CHECK(!param.unsafeGetTensorImpl()->is_python_dispatch(), "dash::Dash: a parameter of shape ", param.sizes(),
      " is a tensor subclass with its own dispatch (a DTensor of FSDP2's fully_shard or of tensor "
      "parallelism, say); dash's C++ takes plain tensors: the local shards of parameters that FSDP shards "
      "(Python's dash.Dash passes them, docs/python.md \"FSDP\"), or whole parameters");
}

}  // namespace

void check_parameters(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::map<const c10::TensorImpl*, size_t> group_of_param;
  std::vector<MemorySpan> spans;
  const at::Tensor* first_param = nullptr;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& param : groups[g].params()) {
      const auto [seen, first] = group_of_param.emplace(param.unsafeGetTensorImpl(), g);
      TORCH_CHECK(first, "dash::Dash: a parameter of shape ", param.sizes(), " appears twice (in parameter groups ",
          seen->second, " and ", g, "); each tensor may be optimised once");
      check_parameter(param);
      if (first_param == nullptr) first_param = &param;
      TORCH_CHECK(param.device() == first_param->device(), "dash::Dash: all parameters must be on one device, got ",
          first_param->device(), " and ", param.device());
      if (param.numel() > 0 && param.has_storage()) spans.push_back(memory_span(param));
    }
  }
  check_disjoint_memory(std::move(spans));
}

std::vector<bool> parameters_with_gradients(const std::vector<at::Tensor>& params,
    const std::vector<at::Tensor>& gradients, const std::vector<std::vector<int64_t>>& planned_shapes) {
  TORCH_CHECK(gradients.size() == params.size(), "dash::Dash: ", gradients.size(), " gradients for ", params.size(),
      " parameters");
  std::vector<bool> has_grad(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].sizes() == at::IntArrayRef(planned_shapes[i]), "dash::Dash: parameter ", i, " has shape ",
        params[i].sizes(), ", but had ", at::IntArrayRef(planned_shapes[i]),
        " when its blocks were planned; a parameter's shape cannot change (build a new optimizer)");
    const auto& grad = gradients[i];
    if (!grad.defined() || params[i].numel() == 0) continue;
    TORCH_CHECK(!grad.is_sparse(), "dash::Dash: sparse gradients are not supported (parameter ", i, " of shape ",
        params[i].sizes(), ")");
    TORCH_CHECK(grad.sizes() == params[i].sizes(), "dash::Dash: the gradient of parameter ", i, " has shape ",
        grad.sizes(), ", the parameter ", params[i].sizes());
    TORCH_CHECK(grad.scalar_type() == params[i].scalar_type(), "dash::Dash: the gradient of parameter ", i, " is ",
        grad.scalar_type(), ", the parameter ", params[i].scalar_type());
    has_grad[i] = true;
  }
  return has_grad;
}

}  // namespace dash::optim
