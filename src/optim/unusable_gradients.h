#pragma once

// What a step does with gradients it cannot use: the largest magnitude over the
// ranks was non-finite or above the overflow limit. It names the parameter to
// blame, and warns (the step is skipped) or raises, as the parameter's group asks
// (DashOptions::non_finite_gradients); every rank decides alike.

#include <dash/optimizer_options.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace dash::optim {
class Distributor;

enum class SkipReason { NonFinite, Overflow };

/// Why the step is skipped, when the largest gradient magnitude over the ranks,
/// `largest`, is NaN or above `overflow_limit` (host reads: this is the rare path).
/// Raises for a non-finite gradient in a group whose policy is to raise (on any
/// rank); else warns, naming the first non-finite parameter, or (all finite) the
/// first too large one. Finiteness is judged in each gradient's own dtype (a float64
/// gradient above FLT_MAX is finite, only its float32 copy in the stacks is not),
/// size in float32, as `largest` was. One small collective over the ranks, through
/// `distributor`: a rank may see none of it (under Zero the gradient can be another
/// rank's alone).
SkipReason judge_unusable_gradients(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& gradients,
    const std::vector<bool>& has_grad, const std::function<NonFiniteGradients(size_t param)>& policy, double largest,
    double overflow_limit, Distributor& distributor);

}  // namespace dash::optim
