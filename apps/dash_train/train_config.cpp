#include "train_config.h"

#include "byte_tokenizer.h"

#include "common/physical_memory.h"

#include <dash/option_names.h>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <set>
#include <variant>
#include <vector>

namespace dash_train {
namespace {

using Member =
    std::variant<std::string TrainConfig::*, double TrainConfig::*, int64_t TrainConfig::*, bool TrainConfig::*>;

struct Key {
  const char* name;
  Member member;
  const char* help;
  bool checkpoint_relevant;  ///< a change makes an existing checkpoint unusable
};

// clang-format off
const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      {"data", &TrainConfig::data, "text file or folder (\"\": the Python 3.11 manual sources)", true},
      {"validation_fraction", &TrainConfig::validation_fraction, "share of documents (or of a single file's tail) held out", true},
      {"dim", &TrainConfig::dim, "model width", true},
      {"layers", &TrainConfig::layers, "decoder layers", true},
      {"heads", &TrainConfig::heads, "attention heads", true},
      {"ffn_hidden", &TrainConfig::ffn_hidden, "SwiGLU hidden width (0: 8/3 dim, multiple of 32)", true},
      {"seq_len", &TrainConfig::seq_len, "tokens (bytes) per training window", true},
      {"name", &TrainConfig::name, "run name: output goes to out_dir/name", false},
      {"out_dir", &TrainConfig::out_dir, "folder for logs, checkpoints and plots", false},
      {"device", &TrainConfig::device, "cpu or cuda[:i]", false},
      {"seed", &TrainConfig::seed, "initialisation and batch-sampling seed", true},
      {"steps", &TrainConfig::steps, "optimizer steps (the lr schedule's length)", true},
      {"batch_size", &TrainConfig::batch_size, "windows per step (per rank)", true},
      {"eval_every", &TrainConfig::eval_every, "validate every this many steps (and at the end)", false},
      {"eval_batches", &TrainConfig::eval_batches, "validation batches, evenly spaced over the split", false},
      {"log_every", &TrainConfig::log_every, "train.csv row and non-terminal progress line every this many steps", false},
      {"checkpoint_every", &TrainConfig::checkpoint_every, "checkpoint every this many steps (0: only at the end)", false},
      {"stop_at", &TrainConfig::stop_at, "stop after this step, checkpointed, as if interrupted (0: run to the end)", false},
      {"resume", &TrainConfig::resume, "continue from out_dir/name/checkpoint.pt", false},
      {"overwrite", &TrainConfig::overwrite, "replace the run already in out_dir/name (else that is an error)", false},
      {"progress", &TrainConfig::progress, "show the progress bar / progress lines", false},
      {"threads", &TrainConfig::threads, "intra-op CPU threads (0: LibTorch's default)", false},
      {"nproc", &TrainConfig::nproc, "local data-parallel ranks (Gloo on 127.0.0.1); or launch with torchrun's variables", false},
      {"communication_dtype", &TrainConfig::communication_dtype, "fp32, bf16 or fp16 updates in distributed DASH's all-gather", true},
      {"distribution_scheme", &TrainConfig::distribution_scheme, "replicated (gradients all-reduced before the step) or zero (dash averages them, each rank its blocks'; needs optimizer dash and clip_grad_norm 0)", true},
      {"lr", &TrainConfig::lr, "peak learning rate", true},
      {"warmup_steps", &TrainConfig::warmup_steps, "linear warm-up steps before the cosine decay", true},
      {"min_lr_ratio", &TrainConfig::min_lr_ratio, "final lr as a fraction of lr", true},
      {"clip_grad_norm", &TrainConfig::clip_grad_norm, "global gradient-norm clip (0: off)", true},
      {"weight_decay", &TrainConfig::weight_decay, "decoupled weight decay of matrices", true},
      {"optimizer", &TrainConfig::optimizer, "adamw or dash", true},
      {"beta1", &TrainConfig::beta1, "AdamW β1 (and DASH's gradient EMA β_G and 1-D AdamW β1)", true},
      {"beta2", &TrainConfig::beta2, "AdamW β2 (and DASH's grafting β_g and 1-D AdamW β2)", true},
      {"eps", &TrainConfig::eps, "AdamW ε (and DASH's grafting ε)", true},
      {"adamw_lr", &TrainConfig::adamw_lr, "with preconditioner spectral_descent: lr of the embedding, output layer and 1-D parameters, which stay on AdamW as Muon prescribes (0: lr)", true},
  };
  return table;
}
// clang-format on

std::string normalised(std::string name) {
  for (auto& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

const Key* find_key(const std::string& name) {
  const auto wanted = normalised(name);
  for (const auto& key : keys()) {
    if (wanted == key.name) return &key;
  }
  return nullptr;
}

std::string type_name(const nlohmann::json& value) { return value.type_name(); }

}  // namespace

bool is_int64(const nlohmann::json& value) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (value.is_number_unsigned())
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double number = value.get<double>();  // 3.0 counts, 3.5 and 1e30 do not
  return number >= -kTwoTo63 && number < kTwoTo63 && number == static_cast<double>(static_cast<int64_t>(number));
}

namespace {

void assign(TrainConfig& config, const Key& key, const nlohmann::json& value, const std::string& source) {
  const auto where = "'" + std::string(key.name) + "' (" + source + ")";
  std::visit(
      [&](auto member) {
        using Field = std::remove_reference_t<decltype(config.*member)>;
        config.*member = json_value_as<Field>(value, where);
      },
      key.member);
}

template <typename Parse>
void check_name(const std::string& key, const std::string& value, Parse parse) {
  try {
    parse(value);
  } catch (const c10::Error& error) {
    TORCH_CHECK(false, "dash-train: '", key, "': ", error.what_without_backtrace());
  }
}

}  // namespace

LlamaConfig TrainConfig::model() const {
  LlamaConfig model;
  model.vocab_size = ByteTokenizer::kVocabularySize;
  model.dim = dim;
  model.layers = layers;
  model.heads = heads;
  model.ffn_hidden = ffn_hidden;
  model.max_seq_len = seq_len;
  return model;
}

void TrainConfig::check() const {
  model().check();
  TORCH_CHECK(validation_fraction > 0.0 && validation_fraction < 1.0,
      "dash-train: 'validation_fraction' must be in (0, 1), got ", validation_fraction);
  // One path component, so that out_dir/name stays inside out_dir.
  const bool control =
      std::any_of(name.begin(), name.end(), [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); });
  TORCH_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos && !control,
      "dash-train: 'name' must be a single folder name (not empty, '.' or '..', no '/', no control characters such as "
      "a newline), got '",
      name, "'");
  TORCH_CHECK(!out_dir.empty(), "dash-train: 'out_dir' must not be empty (use '.' for the current folder)");
  TORCH_CHECK(!(resume && overwrite), "dash-train: 'resume' and 'overwrite' exclude each other");
  TORCH_CHECK(steps >= 1, "dash-train: 'steps' must be ≥ 1, got ", steps);
  TORCH_CHECK(batch_size >= 1, "dash-train: 'batch_size' must be ≥ 1, got ", batch_size);
  // A step's activations grow with batch_size · seq_len · dim per layer: on a CPU,
  // refuse a batch whose layer inputs alone would not fit this machine's memory,
  // before the allocator does so halfway into the first step.
  const double embedding_bytes = 4.0 * static_cast<double>(batch_size) * static_cast<double>(seq_len) *
                                 static_cast<double>(dim) * static_cast<double>(layers + 1);
  const double memory = dash::common::physical_memory_bytes();
  TORCH_CHECK(device != "cpu" || memory == 0.0 || embedding_bytes <= memory, "dash-train: 'batch_size' ", batch_size,
      " with seq_len ", seq_len, ", dim ", dim, " and ", layers, " layers needs at least ", embedding_bytes / 1e9,
      " GB for one step's activations; this machine has ", memory / 1e9, " GB");
  TORCH_CHECK(eval_every >= 1, "dash-train: 'eval_every' must be ≥ 1, got ", eval_every);
  TORCH_CHECK(eval_batches >= 1, "dash-train: 'eval_batches' must be ≥ 1, got ", eval_batches);
  TORCH_CHECK(log_every >= 1, "dash-train: 'log_every' must be ≥ 1, got ", log_every);
  TORCH_CHECK(checkpoint_every >= 0, "dash-train: 'checkpoint_every' must be ≥ 0, got ", checkpoint_every);
  TORCH_CHECK(
      stop_at >= 0 && stop_at <= steps, "dash-train: 'stop_at' must be in [0, steps = ", steps, "], got ", stop_at);
  // More threads than cores only contend (1000 on 2 cores took 41 s for 4 steps).
  const int64_t cores = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  TORCH_CHECK(threads >= 0 && threads <= cores, "dash-train: 'threads' must be in [0, ", cores,
      "] (0: LibTorch's default; this machine has ", cores, " cores), got ", threads);
  TORCH_CHECK(nproc >= 1 && nproc <= 64, "dash-train: 'nproc' must be in [1, 64], got ", nproc);
  check_name("communication_dtype", communication_dtype, dash::parse_communication_dtype);
  check_name("distribution_scheme", distribution_scheme, dash::parse_distribution_scheme);
  if (dash::parse_distribution_scheme(distribution_scheme) == dash::DistributionScheme::Zero) {
    // The gradients are averaged inside the step: before it each rank holds its own,
    // whose norm is not the global one.
    TORCH_CHECK(
        optimizer == "dash", "dash-train: 'distribution_scheme' zero needs optimizer dash, got '", optimizer, "'");
    TORCH_CHECK(clip_grad_norm == 0.0,
        "dash-train: 'distribution_scheme' zero needs clip_grad_norm 0 (the gradients are averaged inside the "
        "optimizer step, after clipping would have happened), got ",
        clip_grad_norm);
  }
  try {
    (void)at::Device(device);
  } catch (const c10::Error&) {
    TORCH_CHECK(false, "dash-train: 'device' must be cpu, cuda or cuda:N (a torch device), got '", device, "'");
  }
  TORCH_CHECK(lr > 0.0, "dash-train: 'lr' must be > 0, got ", lr);
  TORCH_CHECK(warmup_steps >= 0, "dash-train: 'warmup_steps' must be ≥ 0, got ", warmup_steps);
  TORCH_CHECK(
      min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0, "dash-train: 'min_lr_ratio' must be in [0, 1], got ", min_lr_ratio);
  TORCH_CHECK(clip_grad_norm >= 0.0, "dash-train: 'clip_grad_norm' must be ≥ 0 (0: off), got ", clip_grad_norm);
  TORCH_CHECK(weight_decay >= 0.0, "dash-train: 'weight_decay' must be ≥ 0, got ", weight_decay);
  TORCH_CHECK(optimizer == "adamw" || optimizer == "dash", "dash-train: 'optimizer' must be adamw or dash, got '",
      optimizer, "'");
  // Values the model's float32 arithmetic takes (clipping, decay, steps): beyond
  // float32's range they would be Inf there, an error far from the key.
  for (const auto& [key, value] : {std::pair<const char*, double>{"lr", lr}, {"clip_grad_norm", clip_grad_norm},
           {"weight_decay", weight_decay}, {"eps", eps}, {"epsilon", dash.root().epsilon()}}) {
    TORCH_CHECK(value <= std::numeric_limits<float>::max(), "dash-train: '", key, "' must be at most ",
        std::numeric_limits<float>::max(), " (float32's largest number: it is used in float32), got ", value);
  }
  TORCH_CHECK(beta1 >= 0.0 && beta1 < 1.0, "dash-train: 'beta1' must be in [0, 1), got ", beta1);
  TORCH_CHECK(beta2 >= 0.0 && beta2 < 1.0, "dash-train: 'beta2' must be in [0, 1), got ", beta2);
  TORCH_CHECK(eps > 0.0, "dash-train: 'eps' must be > 0, got ", eps);
  TORCH_CHECK(adamw_lr >= 0.0 && adamw_lr <= std::numeric_limits<float>::max(),
      "dash-train: 'adamw_lr' must be ≥ 0 (0: lr) and at most float32's largest number, got ", adamw_lr);
  // The DASH keys' names were parsed when they were set; their ranges are checked by
  // DashOptions itself when the optimizer is built.
}

nlohmann::json parse_json_file(std::istream& in, const std::string& what) {
  // One set of keys per object being read: a key given twice in one object would
  // otherwise be read as its last value, silently.
  std::vector<std::set<std::string>> keys_of_open_objects;
  const auto refuse_duplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys_of_open_objects.emplace_back();
    if (event == Event::object_end) keys_of_open_objects.pop_back();
    if (event == Event::key) {
      const auto key = parsed.get<std::string>();
      TORCH_CHECK(keys_of_open_objects.back().insert(key).second, "dash-train: ", what, " gives the key '", key,
          "' twice in one object; give each key once");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(in, refuse_duplicates);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for 1e400
    TORCH_CHECK(false, "dash-train: ", what, " is not valid JSON: ", error.what());
  }
}

nlohmann::json to_json(const TrainConfig& config) {
  auto values = nlohmann::json::object();
  for (const auto& key : keys()) {
    std::visit([&](auto member) { values[key.name] = config.*member; }, key.member);
  }
  for (const auto& key : dash_keys()) values[key.name] = dash_key_value(config.dash, key.name);
  return values;
}

void apply_json(TrainConfig& config, const nlohmann::json& values, const std::string& source) {
  TORCH_CHECK(values.is_object(), "dash-train: ", source, " must be a JSON object of keys, got ", type_name(values));
  for (const auto& [name, value] : values.items()) {
    const auto current = current_key_name(normalised(name));
    if (const auto* key = find_key(current)) {
      assign(config, *key, value, source);
      continue;
    }
    TORCH_CHECK(set_dash_key(config.dash, current, value, source), "dash-train: unknown key '", name, "' in ", source,
        " (dash-train --help lists the keys)");
  }
}

void apply_config_file(TrainConfig& config, const std::string& path) {
  TORCH_CHECK(!std::filesystem::is_directory(path), "dash-train: --config '", path,
      "' is a folder; give a JSON file ({\"key\": value, ...})");
  std::ifstream in(path);
  TORCH_CHECK(in, "dash-train: cannot read config file '", path, "'");
  apply_json(config, parse_json_file(in, "config file '" + path + "'"), "config file '" + path + "'");
}

std::vector<std::string> checkpoint_compatibility_keys() {
  std::vector<std::string> names;
  for (const auto& key : keys()) {
    if (key.checkpoint_relevant) names.emplace_back(key.name);
  }
  for (const auto& key : dash_keys()) {
    if (key.checkpoint_relevant) names.push_back(key.name);
  }
  return names;
}

std::string config_keys_help() {
  const auto defaults = to_json(TrainConfig{});
  std::ostringstream help;
  auto line = [&](const std::string& name, const std::string& text) {
    std::string flag = "--" + name;
    for (auto& c : flag) {
      if (c == '_') c = '-';
    }
    help << "  " << flag << std::string(flag.size() < 22 ? 22 - flag.size() : 1, ' ') << text << " [default "
         << defaults[name].dump() << "]\n";
  };
  for (const auto& key : keys()) line(key.name, key.help);
  help << " DASH (the optimizer's options under their Python keywords):\n";
  for (const auto& key : dash_keys()) line(key.name, key.help);
  return help.str();
}

nlohmann::json parse_command_line_value(const std::string& name, const std::string& text) {
  try {
    auto value = nlohmann::json::parse(text);
    if (value.is_number() || value.is_boolean() || value.is_null()) return value;
  } catch (const nlohmann::json::out_of_range&) {
    TORCH_CHECK(false, "dash-train: --", name, " ", text, ": the number is out of range");
  } catch (const nlohmann::json::parse_error&) {
  }
  return text;
}

}  // namespace dash_train
