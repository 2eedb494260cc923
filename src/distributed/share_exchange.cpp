#include "distributed/share_exchange.h"
#include "distributed/collective_wait.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

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

ShareExchange::ShareExchange(
    const DistributedContext& context, int64_t share_numel, bool gradients, const at::Device& device, bool own_share)
    : context_(context),
      dtype_(scalar_type(context.options().communication_dtype())),
      device_(device),
      gradients_(gradients) {
  TORCH_CHECK(share_numel >= 0, "dash: a share of ", share_numel, " elements");
  if (own_share) own_updates_ = at::empty({share_numel}, at::TensorOptions().dtype(dtype_).device(device));
}

void ShareExchange::set_round_numel(int64_t round_numel) {
  const int64_t per_word = 4 / static_cast<int64_t>(c10::elementSize(dtype_));
  const int64_t round = std::max(per_word, (round_numel + per_word - 1) / per_word * per_word);
  if (round == round_) return;
  round_ = round;
  const auto world = context_.world_size();
  const auto words = at::TensorOptions().dtype(at::kInt).device(device_);
  send_words_ = at::empty({round_ / per_word}, words);
  receive_words_all_ = at::empty({world * round_ / per_word}, words);
  receive_words_.clear();
  for (int64_t r = 0; r < world; ++r) {
    receive_words_.push_back(receive_words_all_.narrow(0, r * round_ / per_word, round_ / per_word));
  }
  send_values_ = send_words_.view(dtype_);
  receive_values_ = receive_words_all_.view(dtype_);
  round_buffers_ = {send_words_, receive_words_all_};
  if (!gradients_) return;
  const auto floats = words.dtype(at::kFloat);
  const bool float_updates = dtype_ == at::kFloat;
  contributions_ = (float_updates ? receive_values_ : at::empty({world * round_}, floats)).view({world, round_});
  received_ = at::empty({world, round_}, floats);
  average_ = float_updates ? send_values_ : at::empty({round_}, floats);
  round_buffers_.push_back(received_);
  if (!float_updates) round_buffers_.insert(round_buffers_.end(), {contributions_, average_});
}

void ShareExchange::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
  wait_for_collective(work, context_, what);
}

void ShareExchange::all_gather_updates(int64_t begin, int64_t end) {
  TORCH_CHECK(own_updates_.defined(), "dash: this exchange keeps no share of its own; fill send_buffer()");
  TORCH_CHECK(0 <= begin && begin <= end && end - begin <= round_ && end <= own_updates_.numel(),
      "dash: the update round [", begin, ", ", end, ") does not fit a share of ", own_updates_.numel(),
      " in rounds of ", round_);
  send_values_.narrow(0, 0, end - begin).copy_(own_updates_.narrow(0, begin, end - begin));
  all_gather_round();
}

void ShareExchange::all_gather_round() {
  TORCH_CHECK(round_ > 0, "dash: the exchange's rounds are not set");
  std::vector<at::Tensor> inputs{send_words_};
  std::vector<std::vector<at::Tensor>> outputs{receive_words_};
  wait(context_.group().allgather(outputs, inputs), "all-gather of the updates");
}

at::Tensor ShareExchange::updates_of(int64_t rank) const { return receive_values_.narrow(0, rank * round_, round_); }

at::Tensor ShareExchange::average_gradients() {
  TORCH_CHECK(gradients_ && round_ > 0, "dash: this exchange has no gradient buffers");
  std::vector<int64_t> equal_splits;  // empty: every rank's part is one round
  auto input = contributions_.view(-1);
  auto output = received_.view(-1);
  wait(context_.group().alltoall_base(output, input, equal_splits, equal_splits), "all-to-all of the gradients");
  // The sum over ranks in rank order, then one division: for 2 ranks exactly
  // (g₀ + g₁)/2 rounded once, as one process given that average would have it.
  at::sum_out(average_, received_, {0});
  return average_.div_(static_cast<double>(context_.world_size()));
}

int64_t ShareExchange::buffer_bytes() const {
  int64_t bytes = own_updates_.defined() ? static_cast<int64_t>(own_updates_.nbytes()) : 0;
  for (const auto& tensor : round_buffers_) bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes;
}

int64_t ShareExchange::bytes_per_round() const {
  const auto world = context_.world_size();
  int64_t bytes = static_cast<int64_t>(receive_words_all_.element_size()) * receive_words_all_.numel();
  if (gradients_) bytes += 2 * (world - 1) * round_ * 4;
  return bytes;
}

}  // namespace dash::distributed
