#include "optim/rank_agreement.h"

#include "optim/dash_options.h"
#include "optim/option_fields.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace dash::optim {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

uint64_t mix(uint64_t hash, const void* bytes, size_t size) {
  const auto* data = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ULL;  // FNV-1a
  return hash;
}

template <typename Value>
uint64_t hash_of(Value value) {
  if constexpr (std::is_enum_v<Value>) {
    const auto number = static_cast<int64_t>(value);
    return mix(kFnvOffset, &number, sizeof(number));
  } else if constexpr (std::is_same_v<Value, bool>) {
    const unsigned char flag = value ? 1 : 0;
    return mix(kFnvOffset, &flag, 1);
  } else {
    return mix(kFnvOffset, &value, sizeof(value));  // a double's or an integer's bits
  }
}

// Folded to 24 bits: exact in a float32.
float below_2_24(uint64_t hash) { return static_cast<float>((hash ^ (hash >> 24) ^ (hash >> 48)) & 0xffffffULL); }

bool rank_local(const char* name) {
  return std::any_of(std::begin(kRankLocalOptions), std::end(kRankLocalOptions),
      [&](const char* local) { return std::strcmp(local, name) == 0; });
}

// Calls visit(g, name, hash) for every agreed option of every group, in a fixed order.
template <typename Visit>
void for_each_agreed_option(const std::vector<torch::optim::OptimizerParamGroup>& groups, Visit&& visit) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = options_of(groups[g]);
    auto add = [&](const char* name, uint64_t hash) {
      if (!rank_local(name)) visit(g, name, below_2_24(hash));
    };
#define DASH_AGREE(name, type, help) add(#name, hash_of(o.name()));
#define DASH_AGREE_ROOT(name, type, path, help) add(option_fields::optimizer_keyword(#name), hash_of(o.root().path()));
    DASH_OPTION_FIELDS(DASH_AGREE)
    DASH_ROOT_FIELDS(DASH_AGREE_ROOT)
#undef DASH_AGREE
#undef DASH_AGREE_ROOT
    const auto [beta1, beta2] = o.adamw_betas();
    add("adamw_betas", mix(hash_of(beta1), &beta2, sizeof(beta2)));
  }
}

}  // namespace

float agreed_options_fingerprint(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  uint64_t hash = kFnvOffset;
  for_each_agreed_option(groups, [&](size_t, const char*, float value) { hash = mix(hash, &value, sizeof(value)); });
  return below_2_24(hash);
}

at::Tensor agreed_option_extremes(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::Device& device) {
  std::vector<float> values;
  for_each_agreed_option(groups, [&](size_t, const char*, float value) {
    values.push_back(value);
    values.push_back(-value);
  });
  return at::tensor(values, at::TensorOptions().dtype(at::kFloat)).to(device);
}

std::vector<std::string> disagreeing_options(
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::Tensor& extremes) {
  const auto host = extremes.to(at::kCPU).contiguous();
  const auto* values = host.data_ptr<float>();
  std::vector<std::string> names;
  size_t i = 0;
  for_each_agreed_option(groups, [&](size_t g, const char* name, float) {
    if (values[2 * i] != -values[2 * i + 1]) names.push_back("group " + std::to_string(g) + " " + name);
    ++i;
  });
  return names;
}

}  // namespace dash::optim
