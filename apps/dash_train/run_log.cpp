#include "run_log.h"

#include "file_io.h"

#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <sstream>

namespace dash_train {
namespace {

std::string join(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
  return line;
}

size_t field_count(const std::string& line) {
  return static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
}

// The rows of the log at `path` up to `last_step`, each whole: a row with fewer
// fields than the header (a file cut inside it, by a crash or by hand) is dropped
// with a warning, so that the rows appended after them are not glued to it.
std::vector<std::string> rows_up_to(const std::string& path, int64_t last_step, size_t columns) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream lines(text);
  std::vector<std::string> kept;
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    if (++number == 1 || line.empty()) continue;  // the header
    // Every row is written with its newline: a last line without one was cut.
    const bool cut = lines.eof() && !text.empty() && text.back() != '\n';
    const auto first = line.substr(0, line.find(','));
    char* end = nullptr;
    errno = 0;
    const long long step = std::strtoll(first.c_str(), &end, 10);
    TORCH_CHECK(!first.empty() && *end == '\0' && errno == 0, "dash-train: log '", path, "' line ", number,
        " does not start with a step number: '", line.substr(0, 80), "'; it is not this run's log");
    if (cut || field_count(line) != columns) {
      std::cerr << "dash-train: warning: log '" << path << "' line " << number
                << " is not a whole row (the file was cut there): dropped\n";
      continue;
    }
    if (step <= last_step) kept.push_back(line);
  }
  return kept;
}

}  // namespace

CsvLog::CsvLog(const std::string& path, const std::vector<std::string>& columns, int64_t resume_step) : path_(path) {
  const auto kept = resume_step >= 0 ? rows_up_to(path, resume_step, columns.size()) : std::vector<std::string>{};
  errno = 0;
  out_.open(path, std::ios::trunc);
  TORCH_CHECK(out_, "dash-train: cannot write log file '", path, "': ", io_error_text(errno));
  out_ << join(columns) << '\n';
  for (const auto& row : kept) out_ << row << '\n';
  flush();
}

void CsvLog::write(const std::vector<std::string>& fields) {
  out_ << join(fields) << '\n';
  flush();
}

// Every row reaches the file at once (a crash loses none), and a full disk is an
// error naming the log rather than rows silently missing.
void CsvLog::flush() {
  errno = 0;
  out_.flush();
  TORCH_CHECK(out_.good(), "dash-train: cannot write log file '", path_, "': ", io_error_text(errno));
}

ProgressDisplay::ProgressDisplay(int64_t total_steps, int64_t line_every, bool enabled)
    : total_steps_(total_steps), line_every_(line_every), enabled_(enabled), terminal_(isatty(STDERR_FILENO) != 0) {}

void ProgressDisplay::update(int64_t step, double loss, double tokens_per_second, double seconds_left) {
  if (!enabled_) return;
  const bool last = step == total_steps_;
  if (!terminal_ && step % line_every_ != 0 && !last) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(total_steps_, 1));
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld [%s%s] loss %.4f | %.0f tok/s | ETA %s",
      static_cast<long long>(step), static_cast<long long>(total_steps_), std::string(filled, '=').c_str(),
      std::string(kWidth - filled, ' ').c_str(), loss, tokens_per_second, format_duration(seconds_left).c_str());
  if (terminal_) {
    std::cerr << '\r' << line << "\033[K" << std::flush;
    bar_drawn_ = true;
  } else {
    std::cerr << line << '\n';
  }
}

void ProgressDisplay::message(const std::string& text) {
  if (!enabled_) return;
  if (bar_drawn_) std::cerr << "\r\033[K";
  std::cerr << text << '\n' << std::flush;
}

void ProgressDisplay::finish() {
  if (enabled_ && bar_drawn_) std::cerr << '\n';
  bar_drawn_ = false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const auto hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  std::ostringstream text;
  if (hours > 0) {
    text << hours << "h" << (minutes < 10 ? "0" : "") << minutes << "m" << (secs < 10 ? "0" : "") << secs << "s";
  } else if (minutes > 0) {
    text << minutes << "m" << (secs < 10 ? "0" : "") << secs << "s";
  } else {
    text << secs << "s";
  }
  return text.str();
}

}  // namespace dash_train
