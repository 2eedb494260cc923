#include "trainer.h"

#include "file_io.h"
#include "optimizer_factory.h"
#include "run_log.h"

#include <dash/option_names.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace dash_train {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

/// Timings of asynchronous devices mean nothing without waiting for them.
void wait_for(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

at::Device parse_device(const std::string& name) {
  at::Device device(name);
  TORCH_CHECK(!device.is_cuda() || torch::cuda::is_available(), "dash-train: device '", name,
      "' asked for, but no CUDA device is available");
  return device;
}

at::Tensor loss_of(Llama& model, const TokenBatch& batch) {
  const auto logits = model->forward(batch.inputs);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1}));
}

std::string number(double value) {
  std::ostringstream text;
  text.precision(6);
  text << value;
  return text.str();
}

}  // namespace

Trainer::Trainer(
    TrainConfig config, const TextCorpus& corpus, std::shared_ptr<const dash::DistributedContext> distributed)
    : config_(std::move(config)),
      distributed_(std::move(distributed)),
      rank_(distributed_ ? distributed_->rank() : 0),
      world_size_(distributed_ ? distributed_->world_size() : 1),
      device_(parse_device(config_.device)) {
  config_.check();
  if (is_main_process()) folder_ = std::make_unique<RunFolder>(run_dir(), folder_use(config_));
  if (config_.threads > 0) at::set_num_threads(static_cast<int>(config_.threads));
  train_tokens_ = corpus.train.to(device_);
  validation_batches_ =
      validation_batches(corpus.validation.to(device_), config_.batch_size, config_.seq_len, config_.eval_batches);
  torch::manual_seed(static_cast<uint64_t>(config_.seed));
  model_ = Llama(config_.model());
  model_->to(device_);
  optimizer_ = make_optimizer(config_, model_->parameters(), distributed_, model_->auxiliary_matrices());
  lr_scales_ = learning_rate_scales(config_, *optimizer_);
  if (config_.resume) {
    progress_ = load_training_checkpoint(checkpoint_path(), config_, *model_, *optimizer_, world_size_);
  }
}

std::string Trainer::run_dir() const { return config_.run_dir(); }
std::string Trainer::checkpoint_path() const {
  return run_dir() + (rank_ == 0 ? "/checkpoint.pt" : "/checkpoint-rank" + std::to_string(rank_) + ".pt");
}

double Trainer::evaluate() {
  at::NoGradGuard no_grad;
  auto total = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device_));
  for (const auto& batch : validation_batches_) total += loss_of(model_, batch).to(at::kDouble);
  return total.item<double>() / static_cast<double>(validation_batches_.size());
}

void Trainer::save_checkpoint(int64_t step) {
  progress_.step = step;
  progress_.world_size = world_size_;
  // Every rank saves: distributed DASH's optimizer state is sharded.
  std::filesystem::create_directories(run_dir());
  save_training_checkpoint(checkpoint_path(), config_, progress_, *model_, *optimizer_);
}

// A resumed run with nothing left to do: what its checkpoint and summary.json
// recorded (the timings are the summary's; 0 if it has none).
TrainResult Trainer::recorded_result() const {
  TrainResult result;
  result.steps = progress_.step;
  result.finished = progress_.step == config_.steps;
  result.validation = progress_.validation;
  result.final_validation_loss = result.validation.empty() ? NAN : result.validation.back().loss;
  std::ifstream in(run_dir() + "/summary.json");
  const auto summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (summary.is_object()) {
    for (auto [key, field] : {std::pair{"forward_ms", &result.forward_ms},
             std::pair{"backward_ms", &result.backward_ms}, std::pair{"optimizer_ms", &result.optimizer_ms},
             std::pair{"tokens_per_second", &result.tokens_per_second}}) {
      if (summary.contains(key) && summary[key].is_number()) *field = summary[key].get<double>();
    }
  }
  if (const auto* dash_optimizer = dynamic_cast<const dash::Dash*>(optimizer_.get())) {
    result.optimizer_bytes_per_step = dash_optimizer->communicated_bytes_per_step();
  }
  return result;
}

// One optimizer step at `lr` on the step's batch (forward, backward with gradient
// averaging and clipping, optimizer), each phase timed with the device waited for.
Trainer::StepTimes Trainer::train_step(int64_t step, double lr, const std::vector<at::Tensor>& parameters) {
  set_learning_rate(*optimizer_, lr, lr_scales_);
  const auto batch = training_batch(train_tokens_, config_.batch_size, config_.seq_len,
      static_cast<uint64_t>(config_.seed), step, rank_, world_size_);

  auto phase_start = Clock::now();
  const auto loss = loss_of(model_, batch);
  wait_for(device_);
  const double forward_ms = elapsed_ms(phase_start);

  phase_start = Clock::now();
  optimizer_->zero_grad();
  loss.backward();
  // (Under the zero scheme the optimizer step averages them, each rank its blocks'.)
  if (world_size_ > 1 && distributed_->options().scheme() == dash::DistributionScheme::Replicated) {
    std::vector<at::Tensor> gradients;
    for (const auto& parameter : parameters) gradients.push_back(parameter.grad());
    distributed_->average(gradients);
  }
  if (config_.clip_grad_norm > 0.0) torch::nn::utils::clip_grad_norm_(parameters, config_.clip_grad_norm);
  wait_for(device_);
  const double backward_ms = elapsed_ms(phase_start);

  phase_start = Clock::now();
  optimizer_->step();
  wait_for(device_);
  const double optimizer_ms = elapsed_ms(phase_start);

  const double loss_value = loss.item<double>();
  TORCH_CHECK(std::isfinite(loss_value), "dash-train: the training loss became ", loss_value, " at step ", step + 1,
      " (lr ", lr, "); lower lr or raise clip/regularisation");
  return {loss_value, forward_ms, backward_ms, optimizer_ms};
}

// Turns the sums over the steps run into means, adds the validation record and how
// each factor stack's roots were computed, and writes summary.json (main process).
void Trainer::summarize(TrainResult& result, int64_t first_step, int64_t last_step) const {
  const auto steps_run = static_cast<double>(std::max<int64_t>(last_step - first_step, 1));
  result.forward_ms /= steps_run;
  result.backward_ms /= steps_run;
  result.optimizer_ms /= steps_run;
  result.tokens_per_second /= steps_run;
  result.steps = std::max(last_step, first_step);
  result.finished = result.steps == config_.steps;
  result.validation = progress_.validation;
  result.final_validation_loss = result.validation.empty() ? NAN : result.validation.back().loss;
  // How each factor stack's roots were computed, so that root_method auto's choices
  // are on record, and how many roots failed (and were replaced by the previous ones).
  nlohmann::json root_methods = nlohmann::json::object();
  if (const auto* dash_optimizer = dynamic_cast<const dash::Dash*>(optimizer_.get())) {
    result.optimizer_bytes_per_step = dash_optimizer->communicated_bytes_per_step();
    for (const auto& stack : dash_optimizer->diagnostics().factor_stacks) {
      result.root_failures += stack.failures;
      root_methods["group " + std::to_string(stack.group) + ": " + std::to_string(stack.count) + " of " +
                   std::to_string(stack.size) + "x" + std::to_string(stack.size)] = dash::to_string(stack.root_method);
    }
  }
  if (is_main_process()) {
    nlohmann::json summary = {{"steps", result.steps}, {"finished", result.finished},
        {"final_validation_loss", result.final_validation_loss},
        {"final_validation_perplexity", std::exp(result.final_validation_loss)}, {"forward_ms", result.forward_ms},
        {"backward_ms", result.backward_ms}, {"optimizer_ms", result.optimizer_ms},
        {"tokens_per_second", result.tokens_per_second}, {"world_size", world_size_},
        {"optimizer_bytes_per_step", result.optimizer_bytes_per_step}, {"root_methods", root_methods},
        {"root_failures", result.root_failures}};
    write_file_atomically(run_dir() + "/summary.json", summary.dump(2) + "\n");
  }
}

TrainResult Trainer::run() {
  const int64_t first_step = progress_.step;
  const int64_t last_step = config_.stop_at > 0 ? config_.stop_at : config_.steps;
  const int64_t resume_step = config_.resume ? first_step : -1;
  const int64_t tokens_per_step = config_.batch_size * config_.seq_len * world_size_;

  if (config_.resume && first_step >= last_step) {
    if (is_main_process()) {
      std::cerr << "dash-train: the run in '" << run_dir() << "' is already at step " << first_step
                << "; nothing to do, its logs are left as they are\n";
    }
    return recorded_result();
  }

  std::unique_ptr<CsvLog> train_log, validation_log;
  if (is_main_process()) {
    write_file_atomically(run_dir() + "/config.json", to_json(config_).dump(2) + "\n");
    train_log = std::make_unique<CsvLog>(run_dir() + "/train.csv",
        std::vector<std::string>{"step", "lr", "loss", "tokens_per_s", "forward_ms", "backward_ms", "optimizer_ms"},
        resume_step);
    validation_log = std::make_unique<CsvLog>(run_dir() + "/validation.csv",
        std::vector<std::string>{"step", "tokens", "loss", "perplexity", "train_seconds"}, resume_step);
  }
  ProgressDisplay display(config_.steps, config_.log_every, config_.progress && is_main_process());
  if (first_step > 0) display.message("resumed at step " + std::to_string(first_step));

  auto record_validation = [&](int64_t step) {
    if (!is_main_process()) return;  // the parameters are the same on every rank
    const double loss = evaluate();
    progress_.validation.push_back({step, step * tokens_per_step, loss, progress_.train_seconds});
    if (validation_log) {
      validation_log->write({std::to_string(step), std::to_string(step * tokens_per_step), number(loss),
          number(std::exp(loss)), number(progress_.train_seconds)});
    }
    display.message("step " + std::to_string(step) + ": validation loss " + number(loss) + " (perplexity " +
                    number(std::exp(loss)) + " per byte)");
  };

  auto parameters = model_->parameters();
  TrainResult result;
  double step_seconds_ema = 0.0;
  for (int64_t step = first_step; step < last_step; ++step) {
    const auto step_start = Clock::now();
    const double lr = scheduled_lr(config_, step);
    const auto times = train_step(step, lr, parameters);
    const double step_seconds = elapsed_ms(step_start) / 1000.0;
    progress_.train_seconds += step_seconds;
    step_seconds_ema = step == first_step ? step_seconds : 0.9 * step_seconds_ema + 0.1 * step_seconds;
    const double tokens_per_second = static_cast<double>(tokens_per_step) / step_seconds;
    result.forward_ms += times.forward_ms;
    result.backward_ms += times.backward_ms;
    result.optimizer_ms += times.optimizer_ms;
    result.tokens_per_second += tokens_per_second;

    const int64_t done = step + 1;
    if (train_log && (done % config_.log_every == 0 || done == last_step)) {
      train_log->write({std::to_string(done), number(lr), number(times.loss), number(tokens_per_second),
          number(times.forward_ms), number(times.backward_ms), number(times.optimizer_ms)});
    }
    display.update(done, times.loss, tokens_per_second, step_seconds_ema * static_cast<double>(last_step - done));
    if (done % config_.eval_every == 0 || done == config_.steps) record_validation(done);
    const bool periodic = config_.checkpoint_every > 0 && done % config_.checkpoint_every == 0;
    if (periodic || done == last_step) save_checkpoint(done);
  }
  display.finish();

  summarize(result, first_step, last_step);
  return result;
}

}  // namespace dash_train
