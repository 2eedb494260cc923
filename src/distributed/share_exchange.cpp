#include "distributed/share_exchange.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>

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
    const DistributedContext& context, int64_t share_numel, bool gradients, const at::Device& device)
    : context_(context) {
  TORCH_CHECK(share_numel >= 0, "dash: a share of ", share_numel, " elements");
  const auto dtype = scalar_type(context.options().communication_dtype());
  const int64_t per_word = 4 / static_cast<int64_t>(c10::elementSize(dtype));
  share_ = std::max(per_word, (share_numel + per_word - 1) / per_word * per_word);
  const auto world = context.world_size();
  const auto words = at::TensorOptions().dtype(at::kInt).device(device);
  send_words_ = at::empty({share_ / per_word}, words);
  receive_words_all_ = at::empty({world * share_ / per_word}, words);
  for (int64_t r = 0; r < world; ++r) {
    receive_words_.push_back(receive_words_all_.narrow(0, r * share_ / per_word, share_ / per_word));
  }
  send_values_ = send_words_.view(dtype);
  receive_values_ = receive_words_all_.view(dtype);
  owned_buffers_ = {send_words_, receive_words_all_};
  if (!gradients) return;
  const auto floats = words.dtype(at::kFloat);
  const bool float_updates = dtype == at::kFloat;
  contributions_ = (float_updates ? receive_values_ : at::empty({world * share_}, floats)).view({world, share_});
  received_ = at::empty({world, share_}, floats);
  average_ = float_updates ? send_values_ : at::empty({share_}, floats);
  owned_buffers_.push_back(received_);
  if (!float_updates) owned_buffers_.insert(owned_buffers_.end(), {contributions_, average_});
}

void ShareExchange::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
  try {
    work->wait(context_.options().timeout());
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "dash::Dash: rank ", context_.rank(), " of ", context_.world_size(), ": the ", what,
        " failed (a rank exited or hung?): ", error.what());
  }
}

void ShareExchange::all_gather_updates() {
  std::vector<at::Tensor> inputs{send_words_};
  std::vector<std::vector<at::Tensor>> outputs{receive_words_};
  wait(context_.group().allgather(outputs, inputs), "all-gather of the updates");
}

at::Tensor ShareExchange::updates_of(int64_t rank) const { return receive_values_.narrow(0, rank * share_, share_); }

at::Tensor ShareExchange::average_gradients() {
  TORCH_CHECK(contributions_.defined(), "dash: this exchange was made without gradient buffers");
  std::vector<int64_t> equal_splits;  // empty: every rank's part is share_ elements
  auto input = contributions_.view(-1);
  auto output = received_.view(-1);
  wait(context_.group().alltoall_base(output, input, equal_splits, equal_splits), "all-to-all of the gradients");
  // The sum over ranks in rank order, then one division: for 2 ranks exactly
  // (g₀ + g₁)/2 rounded once, as one process given that average would have it.
  at::sum_out(average_, received_, {0});
  return average_.div_(static_cast<double>(context_.world_size()));
}

at::Tensor ShareExchange::maximum(const at::Tensor& values) const {
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> buffer{at::nan_to_num(values.to(at::kFloat), infinity, infinity, -infinity).contiguous()};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  wait(context_.group().allreduce(buffer, options), "all-reduce that decides the step");
  return buffer[0];
}

int64_t ShareExchange::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& tensor : owned_buffers_) bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  return bytes;
}

int64_t ShareExchange::bytes_per_step() const {
  const auto world = context_.world_size();
  int64_t bytes = static_cast<int64_t>(receive_words_all_.element_size()) * receive_words_all_.numel();
  if (contributions_.defined()) bytes += 2 * (world - 1) * share_ * 4;
  return bytes;
}

}  // namespace dash::distributed
