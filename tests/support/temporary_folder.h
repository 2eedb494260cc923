#pragma once

// A fresh, empty temporary folder for one test, removed at destruction.

#include <unistd.h>

#include <filesystem>
#include <string>

namespace dash::testing {

class TemporaryFolder {
 public:
  TemporaryFolder() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("dash-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TemporaryFolder() { std::filesystem::remove_all(path_); }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;

  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace dash::testing
