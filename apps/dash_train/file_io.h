#pragma once

// Files written so that a crash, a full disk or a kill never leaves a half-written
// one in place of a good one, and every failure is an error naming the file.

#include <cstddef>
#include <cstdint>
#include <string>

namespace dash_train {

/// Replaces `path` with `bytes`: written to `path`.tmp, fsynced, renamed over
/// `path`, and the folder fsynced. On any failure (a full disk, a file-size limit,
/// a missing folder) the temporary file is removed, `path` keeps its previous
/// contents, and the error names `path` and the cause.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// The text of an errno value for an I/O error message ("write failed" for 0: a
/// stream that failed without setting errno).
std::string io_error_text(int error);

/// 64-bit FNV-1a of a byte string: stable across machines; detects the overwritten
/// or truncated bytes a checksum is for (not an adversary).
uint64_t fnv1a(const char* data, size_t size);
inline uint64_t fnv1a(const std::string& bytes) { return fnv1a(bytes.data(), bytes.size()); }

}  // namespace dash_train
