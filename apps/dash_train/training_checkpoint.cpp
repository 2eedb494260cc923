#include "training_checkpoint.h"

#include "file_io.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <sstream>

namespace dash_train {
namespace {

constexpr const char* kPayloadKey = "payload";
constexpr const char* kChecksumKey = "checksum";

nlohmann::json compatibility_values(const TrainConfig& config) {
  const auto all = to_json(config);
  auto values = nlohmann::json::object();
  for (const auto& key : checkpoint_compatibility_keys()) values[key] = all[key];
  return values;
}

at::Tensor validation_table(const std::vector<ValidationPoint>& points) {
  auto table = at::empty({static_cast<int64_t>(points.size()), 4}, at::kDouble);
  auto rows = table.accessor<double, 2>();
  for (size_t i = 0; i < points.size(); ++i) {
    const auto row = static_cast<int64_t>(i);
    rows[row][0] = static_cast<double>(points[i].step);
    rows[row][1] = static_cast<double>(points[i].tokens);
    rows[row][2] = points[i].loss;
    rows[row][3] = points[i].train_seconds;
  }
  return table;
}

std::vector<ValidationPoint> validation_points(const at::Tensor& table) {
  std::vector<ValidationPoint> points;
  const auto rows = table.accessor<double, 2>();
  for (int64_t i = 0; i < table.size(0); ++i) {
    // Checkpoints before training time was recorded have three columns.
    const double seconds = table.size(1) > 3 ? rows[i][3] : 0.0;
    points.push_back({static_cast<int64_t>(rows[i][0]), static_cast<int64_t>(rows[i][1]), rows[i][2], seconds});
  }
  return points;
}

}  // namespace

void check_checkpoint_config(const std::string& saved_json, const TrainConfig& config, const std::string& path) {
  // The saved values read as a config is (keys under their current names, names of
  // enums as the options spell them), over the defaults: a key the checkpoint lacks
  // (written before the key existed) had its default.
  TrainConfig written;
  apply_json(written, nlohmann::json::parse(saved_json), "checkpoint '" + path + "'");
  const auto saved = compatibility_values(written);
  const auto current = compatibility_values(config);
  for (const auto& [key, value] : current.items()) {
    TORCH_CHECK(saved[key] == value, "dash-train: checkpoint '", path, "' was written with ", key, " = ",
        saved[key].dump(), ", this run has ", value.dump(), "; resume with the same value or start a new run");
  }
}

// The checkpoint file is an archive of two entries: "payload", the bytes of the
// archive that holds the run (config, step, validation, model, optimizer), and
// "checksum", their FNV-1a. The archive format itself does not verify its entries'
// contents, so without it overwritten bytes loaded silently.
void save_training_checkpoint(const std::string& path, const TrainConfig& config, const CheckpointProgress& progress,
    torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  archive.write("config", c10::IValue(compatibility_values(config).dump()));
  archive.write("step", c10::IValue(progress.step));
  archive.write("train_seconds", c10::IValue(progress.train_seconds));
  archive.write("world_size", c10::IValue(progress.world_size));
  archive.write("validation", validation_table(progress.validation));
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  std::ostringstream payload;
  archive.save_to(payload);
  const auto bytes = payload.str();

  torch::serialize::OutputArchive file;
  file.write(
      kPayloadKey, at::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, at::kByte));
  file.write(kChecksumKey, c10::IValue(static_cast<int64_t>(fnv1a(bytes))));
  std::ostringstream contents;
  file.save_to(contents);
  // Serialised in memory first: a failing disk is then one clear error here, not
  // an exception from inside the archive writer.
  write_file_atomically(path, contents.str());
}

CheckpointProgress load_training_checkpoint(const std::string& path, const TrainConfig& config,
    torch::nn::Module& model, torch::optim::Optimizer& optimizer, int64_t world_size) {
  TORCH_CHECK(std::filesystem::exists(path), "dash-train: --resume: no checkpoint at '", path, "'");
  const auto parameters = model.parameters();
  const auto device = parameters.empty() ? at::Device(at::kCPU) : parameters.front().device();
  // The archive is read from the payload's bytes: they outlive it.
  at::Tensor payload;
  torch::serialize::InputArchive archive;
  c10::IValue saved_config;
  try {
    torch::serialize::InputArchive file;
    file.load_from(path, at::Device(at::kCPU));  // the payload's bytes are read on the host
    if (file.try_read(kPayloadKey, payload)) {
      c10::IValue checksum;
      file.read(kChecksumKey, checksum);
      payload = payload.contiguous();
      const auto* data = static_cast<const char*>(payload.data_ptr());
      const auto size = static_cast<size_t>(payload.numel());
      TORCH_CHECK(static_cast<int64_t>(fnv1a(data, size)) == checksum.toInt(), "checksum mismatch");
      archive.load_from(data, size, device);
    } else {
      // Written before checkpoints carried a checksum: the whole file is the run's archive.
      TORCH_WARN("dash-train: checkpoint '", path, "' has no checksum (written by an older dash-train)");
      archive.load_from(path, device);
    }
    archive.read("config", saved_config);
  } catch (const c10::Error& error) {
    TORCH_CHECK(false, "dash-train: checkpoint '", path, "' is corrupt or unreadable (", error.what_without_backtrace(),
        "); resume from an intact copy or start a new run with --overwrite");
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "dash-train: checkpoint '", path, "' is corrupt or unreadable (", error.what(),
        "); resume from an intact copy or start a new run with --overwrite");
  }
  check_checkpoint_config(saved_config.toStringRef(), config, path);
  c10::IValue step;
  archive.read("step", step);
  c10::IValue train_seconds(0.0);
  (void)archive.try_read("train_seconds", train_seconds);
  c10::IValue written_world(world_size);  // (checkpoints before 2026-12-08 do not say; the optimizer checks)
  (void)archive.try_read("world_size", written_world);
  TORCH_CHECK(written_world.toInt() == world_size, "dash-train: checkpoint '", path, "' was written by a run on ",
      written_world.toInt(), " rank", written_world.toInt() == 1 ? "" : "s", ", this run has ", world_size,
      ": resume it with --nproc ", written_world.toInt(), " (each rank resumes its own optimizer shard)");
  at::Tensor validation;
  archive.read("validation", validation);
  validation = validation.cpu();
  torch::serialize::InputArchive model_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
  torch::serialize::InputArchive optimizer_archive;
  archive.read("optimizer", optimizer_archive);
  optimizer.load(optimizer_archive);
  // The options came with the checkpoint; the workspace limit is this run's: it
  // decides memory, not the arithmetic, and may change on resume.
  if (config.optimizer == "dash") {
    for (auto& group : optimizer.param_groups()) {
      static_cast<dash::DashOptions&>(group.options()).workspace_limit(config.dash.workspace_limit());
    }
  }
  return {step.toInt(), train_seconds.toDouble(), validation_points(validation), world_size};
}

}  // namespace dash_train
