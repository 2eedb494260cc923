#pragma once

// The files a run writes: CSV logs that survive a resume, and the progress display.

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace dash_train {

/// A CSV file whose first column is the step. Opening it for a resumed run keeps the
/// rows up to `resume_step` and drops the ones a crashed run wrote after its last
/// checkpoint, so the log reads as if the run had never stopped.
class CsvLog {
 public:
  /// resume_step < 0: start a new file.
  CsvLog(const std::string& path, const std::vector<std::string>& columns, int64_t resume_step);
  /// Appends a row and flushes it; a failed write is an error naming the file.
  void write(const std::vector<std::string>& fields);

 private:
  void flush();

  std::string path_;
  std::ofstream out_;
};

/// One line of progress: a bar with loss, tokens/s and ETA, redrawn in place on a
/// terminal; on a pipe or file, one line every `line_every` steps instead.
class ProgressDisplay {
 public:
  ProgressDisplay(int64_t total_steps, int64_t line_every, bool enabled);
  void update(int64_t step, double loss, double tokens_per_second, double seconds_left);
  /// A message on its own line (validation results), not overwritten by the bar.
  void message(const std::string& text);
  void finish();

 private:
  int64_t total_steps_;
  int64_t line_every_;
  bool enabled_;
  bool terminal_;
  bool bar_drawn_ = false;
};

/// "1h02m03s" / "2m03s" / "3s".
std::string format_duration(double seconds);

}  // namespace dash_train
