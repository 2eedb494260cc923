#pragma once

// The machine's memory, for the tools' checks of sizes too large to run (dash-bench's
// models, dash-train's batches): refused before a run starts, not by the allocator
// halfway through it.

#include <unistd.h>

namespace dash::common {

/// Bytes of physical memory (0 where the system does not say).
inline double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size) : 0.0;
}

}  // namespace dash::common
