#include "run_folder.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace dash_train {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The files a run writes (trainer.cpp, training_checkpoint.cpp): their presence
// means that the folder holds a run; --overwrite removes exactly these.
bool is_run_file(const std::string& file) {
  if (file == "config.json" || file == "train.csv" || file == "validation.csv" || file == "summary.json") return true;
  return file.rfind("checkpoint", 0) == 0 && (ends_with(file, ".pt") || ends_with(file, ".pt.tmp"));
}

std::string first_run_file(const std::string& folder) {
  std::error_code error;
  if (!fs::is_directory(folder, error)) return {};
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    const auto file = entry.path().filename().string();
    if (is_run_file(file)) return file;
  }
  return {};
}

// The folder's contents against `use` (the caller holds its lock, or checks early).
void check_contents(const std::string& folder, FolderUse use) {
  std::error_code error;
  TORCH_CHECK(!fs::exists(folder, error) || fs::is_directory(folder, error), "dash-train: the run folder '", folder,
      "' exists and is not a folder");
  if (use == FolderUse::Resume) {
    TORCH_CHECK(fs::exists(folder + "/checkpoint.pt", error), "dash-train: --resume: no checkpoint at '", folder,
        "/checkpoint.pt'");
  } else if (use == FolderUse::New) {
    const auto file = first_run_file(folder);
    TORCH_CHECK(file.empty(), "dash-train: the run folder '", folder, "' already holds a run (", file,
        "); pass --resume to continue it, --overwrite to replace it, or choose another --name / --out-dir");
  }
}

std::string in_use_message(const std::string& folder) {
  return "dash-train: the run folder '" + folder +
         "' is in use by another dash-train process; wait for it to finish or choose another --name / --out-dir";
}

// Whether another process holds the folder's lock now (RunFolder's): tried and
// let go at once.
bool locked_by_another_process(const std::string& folder) {
  const auto lock_path = folder + "/.lock";
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no lock file: no run ever locked it
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // (releases it where this call took it)
  return held;
}

}  // namespace

FolderUse folder_use(const TrainConfig& config) {
  return config.resume ? FolderUse::Resume : config.overwrite ? FolderUse::Overwrite : FolderUse::New;
}

void check_run_folder(const std::string& folder, FolderUse use) {
  // In use first: a run that has not written its first checkpoint yet is not one
  // without a checkpoint to resume.
  TORCH_CHECK(!locked_by_another_process(folder), in_use_message(folder));
  check_contents(folder, use);
}

RunFolder::RunFolder(std::string folder, FolderUse use) : folder_(std::move(folder)) {
  if (use == FolderUse::Resume) check_run_folder(folder_, use);  // creates nothing when there is nothing to resume
  std::error_code error;
  fs::create_directories(folder_, error);
  TORCH_CHECK(!error, "dash-train: cannot create the run folder '", folder_, "': ", error.message());
  const auto lock_path = folder_ + "/.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TORCH_CHECK(lock_fd_ >= 0, "dash-train: cannot open the lock file '", lock_path, "': ", std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int cause = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    TORCH_CHECK(cause != EWOULDBLOCK, in_use_message(folder_));
    TORCH_CHECK(false, "dash-train: cannot lock '", lock_path, "': ", std::strerror(cause));
  }
  try {
    check_contents(folder_, use);
    if (use == FolderUse::Overwrite) {
      for (const auto& entry : fs::directory_iterator(folder_)) {
        if (is_run_file(entry.path().filename().string())) fs::remove(entry.path());
      }
    }
  } catch (...) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

}  // namespace dash_train
