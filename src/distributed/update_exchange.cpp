#include "distributed/update_exchange.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace dash::distributed {
namespace {

at::ScalarType scalar_type(CommunicationDtype dtype) {
  switch (dtype) {
    case CommunicationDtype::BF16:
      return at::kBFloat16;
    case CommunicationDtype::FP16:
      return at::kHalf;
    case CommunicationDtype::FP32:
      break;
  }
  return at::kFloat;
}

}  // namespace

UpdateExchange::UpdateExchange(const DistributedContext& context, const std::vector<std::vector<int64_t>>& positions,
    int64_t flat_numel, const at::Device& device)
    : context_(context) {
  TORCH_CHECK(static_cast<int64_t>(positions.size()) == context.world_size(),
      "dash: the update exchange needs positions for each of ", context.world_size(), " ranks");
  const auto dtype = scalar_type(context.options().communication_dtype());
  const int64_t per_word = 4 / static_cast<int64_t>(c10::elementSize(dtype));
  // Every rank sends the same length (all-gather needs it), rounded up to whole words.
  int64_t max_count = per_word;
  for (const auto& owned : positions) max_count = std::max<int64_t>(max_count, static_cast<int64_t>(owned.size()));
  max_count = (max_count + per_word - 1) / per_word * per_word;
  // Padding entries point at the scratch element flat_numel, so that one
  // index_copy_ writes everything back.
  std::vector<int64_t> all(positions.size() * static_cast<size_t>(max_count), flat_numel);
  for (size_t r = 0; r < positions.size(); ++r) {
    std::copy(positions[r].begin(), positions[r].end(), all.begin() + static_cast<std::ptrdiff_t>(r) * max_count);
  }
  receive_index_ = at::tensor(all, at::kLong).to(device);
  send_index_ = receive_index_.narrow(0, context.rank() * max_count, max_count).clone();
  const auto words = at::TensorOptions().dtype(at::kInt).device(device);
  const int64_t words_per_rank = max_count / per_word;
  send_words_ = at::empty({words_per_rank}, words);
  receive_words_all_ = at::empty({context.world_size() * words_per_rank}, words);
  for (int64_t r = 0; r < context.world_size(); ++r) {
    receive_words_.push_back(receive_words_all_.narrow(0, r * words_per_rank, words_per_rank));
  }
  send_values_ = send_words_.view(dtype);
  receive_values_ = receive_words_all_.view(dtype);
  if (dtype != at::kFloat) {
    const auto staging = at::TensorOptions().dtype(at::kFloat).device(device);
    send_staging_ = at::empty({max_count}, staging);
    receive_staging_ = at::empty({receive_values_.numel()}, staging);
  }
}

void UpdateExchange::exchange(at::Tensor& flat_update) {
  TORCH_CHECK(flat_update.scalar_type() == at::kFloat, "dash: the update exchange works on float32 updates");
  if (send_staging_.defined()) {
    at::index_select_out(send_staging_, flat_update, 0, send_index_);
    send_values_.copy_(send_staging_);  // rounds to 16 bits
  } else {
    at::index_select_out(send_values_, flat_update, 0, send_index_);
  }
  std::vector<at::Tensor> inputs{send_words_};
  std::vector<std::vector<at::Tensor>> outputs{receive_words_};
  auto work = context_.group().allgather(outputs, inputs);
  try {
    work->wait(context_.options().timeout());
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "dash::Dash: rank ", context_.rank(), " of ", context_.world_size(),
        ": the all-gather of the updates failed (a rank exited or hung?): ", error.what());
  }
  if (receive_staging_.defined()) {
    receive_staging_.copy_(receive_values_);
    flat_update.index_copy_(0, receive_index_, receive_staging_);
  } else {
    flat_update.index_copy_(0, receive_index_, receive_values_);
  }
}

int64_t UpdateExchange::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto* tensor :
      {&send_index_, &receive_index_, &send_words_, &receive_words_all_, &send_staging_, &receive_staging_}) {
    if (tensor->defined()) bytes += tensor->numel() * static_cast<int64_t>(tensor->element_size());
  }
  return bytes;
}

int64_t UpdateExchange::bytes_per_step() const {
  // Sends its share, receives the other ranks' (world_size − 1) shares.
  return static_cast<int64_t>(receive_words_all_.element_size()) * receive_words_all_.numel();
}

}  // namespace dash::distributed
