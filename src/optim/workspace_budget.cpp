#include "optim/workspace_budget.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

namespace dash::optim {

WorkspaceBudget workspace_budget(double workspace_limit, int64_t state_bytes) {
  // (check_options refused any other value, naming the option.)
  TORCH_INTERNAL_ASSERT(workspace_limit >= 0.0 && std::isfinite(workspace_limit));
  if (workspace_limit == 0.0) return {};
  if (workspace_limit >= 1.0) {
    // Beyond int64's range is no limit in practice.
    return {workspace_limit >= 9.0e18 ? int64_t{0} : static_cast<int64_t>(workspace_limit)};
  }
  return {std::max(kWorkspaceFloorBytes, static_cast<int64_t>(workspace_limit * static_cast<double>(state_bytes)))};
}

WorkspaceBudget largest_budget(const std::vector<WorkspaceBudget>& budgets) {
  WorkspaceBudget largest;
  for (size_t g = 0; g < budgets.size(); ++g) {
    if (!budgets[g].bounded()) return {};
    largest.limit = std::max(largest.limit, budgets[g].limit);
  }
  return largest;
}

int64_t items_per_chunk(int64_t count, int64_t bytes_per_item, int64_t fixed_bytes, int64_t budget_bytes) {
  TORCH_CHECK(count >= 0 && bytes_per_item >= 0 && fixed_bytes >= 0 && budget_bytes >= 0,
      "dash: items_per_chunk: negative sizes (", count, ", ", bytes_per_item, ", ", fixed_bytes, ", ", budget_bytes,
      ")");
  if (budget_bytes == 0 || bytes_per_item == 0) return count;
  const int64_t fitting = (budget_bytes - std::min(fixed_bytes, budget_bytes)) / bytes_per_item;
  return std::min(count, std::max<int64_t>(fitting, 1));
}

std::vector<std::vector<int64_t>> split_into_chunks(const std::vector<int64_t>& items, int64_t size) {
  TORCH_CHECK(size >= 1, "dash: split_into_chunks: a chunk holds at least one item, got size ", size);
  std::vector<std::vector<int64_t>> chunks;
  for (size_t start = 0; start < items.size(); start += static_cast<size_t>(size)) {
    const auto end = std::min(items.size(), start + static_cast<size_t>(size));
    chunks.emplace_back(
        items.begin() + static_cast<std::ptrdiff_t>(start), items.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return chunks;
}

}  // namespace dash::optim
