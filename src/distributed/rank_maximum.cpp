#include "distributed/rank_maximum.h"

#include "distributed/c10d_compat.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>
#include <vector>

namespace dash::distributed {

void take_maximum_over_ranks(const DistributedContext& context, at::Tensor& values) {
  TORCH_CHECK(values.scalar_type() == at::kFloat && values.is_contiguous(),
      "dash: take_maximum_over_ranks needs contiguous float32 values, got ", values.scalar_type());
  const double infinity = std::numeric_limits<double>::infinity();
  values.nan_to_num_(infinity, infinity, -infinity);
  std::vector<at::Tensor> buffer{values};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  auto work = context.group().allreduce(buffer, options);
  try {
    work->wait(context.options().timeout());
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "dash::Dash: rank ", context.rank(), " of ", context.world_size(),
        ": the all-reduce that decides the step failed (a rank exited or hung?): ", error.what());
  }
}

}  // namespace dash::distributed
