#include "distributed/rank_maximum.h"

#include "distributed/c10d_compat.h"
#include "distributed/collective_wait.h"

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
  wait_for_collective(context.group().allreduce(buffer, options), context, "all-reduce that decides the step");
}

}  // namespace dash::distributed
