#pragma once

// The folder a run writes to (out_dir/name): one run at a time, and an existing run
// replaced only when asked to.

#include "train_config.h"

#include <string>

namespace dash_train {

/// What a run does with its folder.
enum class FolderUse {
  New,        ///< the folder must not hold a run yet
  Overwrite,  ///< a run already there is removed first (--overwrite)
  Resume,     ///< the run there continues (--resume)
};

/// Resume with --resume, Overwrite with --overwrite, else New.
FolderUse folder_use(const TrainConfig& config);

/// Fails, naming the folder and the flag that would allow it, when `use` does not
/// fit what `folder` holds (New: a run is there; Resume: no checkpoint is there).
/// Reads only; the launcher and `compare` check every run with it before starting any.
void check_run_folder(const std::string& folder, FolderUse use);

/// out_dir/name held exclusively (an advisory lock on `.lock` inside it, released
/// by the kernel when the process ends, however it ends) for the lifetime of the
/// object. A second process that opens the same folder gets an error at once.
class RunFolder {
 public:
  /// Creates the folder, takes the lock, then checks `use` (check_run_folder);
  /// Overwrite removes the files of the run that was there.
  RunFolder(std::string folder, FolderUse use);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  const std::string& path() const { return folder_; }

 private:
  std::string folder_;
  int lock_fd_ = -1;
};

}  // namespace dash_train
