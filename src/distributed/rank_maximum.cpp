#include "distributed/rank_maximum.h"

#include "distributed/c10d_compat.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>
#include <vector>

namespace dash::distributed {

at::Tensor maximum_over_ranks(const DistributedContext& context, const at::Tensor& values) {
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> buffer{at::nan_to_num(values.to(at::kFloat), infinity, infinity, -infinity).contiguous()};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  auto work = context.group().allreduce(buffer, options);
  try {
    work->wait(context.options().timeout());
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "dash::Dash: rank ", context.rank(), " of ", context.world_size(),
        ": the all-reduce that decides the step failed (a rank exited or hung?): ", error.what());
  }
  return buffer[0];
}

}  // namespace dash::distributed
