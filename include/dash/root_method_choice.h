#pragma once

#if defined(DASH_LAYER_KERNELS)
#error "dash layering: <dash/root_method_choice.h> belongs to the linalg layer (docs/architecture.md)"
#endif

// RootMethod::Auto: which inverse-root method is fastest, at a required accuracy,
// for one stack of matrices on the device it lives on.

#include <dash/inverse_root.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace dash {

/// One method tried on a stack.
struct RootMethodTrial {
  RootMethod method = RootMethod::EVD;
  /// Wall time of inverse_root() on the whole stack, the device waited for (the
  /// fastest of 3 runs when one takes under 100 ms); NaN when the method cannot
  /// compute this root (NewtonDB for p not a power of two).
  double milliseconds = 0.0;
  /// Error of its roots against float64 eigh (see choose_root_method()), the
  /// largest over the sampled matrices; +Inf when a root of a finite matrix is not
  /// finite or (ε > 0) has an entry above 2·ε^{-1/p}, which the optimizer rejects,
  /// or when the method failed.
  double error = 0.0;
  bool meets_accuracy = false;  ///< error ≤ options.auto_max_error()
};

struct RootMethodChoice {
  /// Of the trials that meet the accuracy, the most accurate among those within
  /// 10 % of the fastest one's time (closer than that, timing noise would decide);
  /// when none meets it, the most accurate (with a warning).
  RootMethod method = RootMethod::EVD;
  std::vector<RootMethodTrial> trials;  ///< EVD, CoupledNewton, NewtonDB, Chebyshev
};

/// Times inverse_root() on `matrices` ((N, b, b), symmetric) with each method and
/// the other settings of `options` (scaling, steps, precision, ε; its method is
/// ignored), and measures each one's error on up to 8 matrices spread over the
/// stack, against (A₊ + εI)^{-1/p} from float64 eigh (A₊: negative eigenvalues
/// clipped). The error weighs the root by what it is applied to: a Shampoo factor
/// A is the second moment of the gradient columns g it preconditions, so
///     error = ‖(X − X*) A₊^{1/2}‖_F / ‖X* A₊^{1/2}‖_F
/// is the relative RMS error of X·g over gradients with E[g gᵀ] = A. (The plain
/// ‖X − X*‖_F/‖X*‖_F is dominated by the near-null directions of a training
/// factor, which no gradient visits: there even float32 EVD is 0.6 off.)
/// Eigenvalues below b·u·λ_max (u: unit roundoff of the input's type) are
/// rounding of the input, not resolved by it, and carry no weight.
/// Every method runs once on one matrix before it is timed (library start-up),
/// and the device is waited for around each timing: a one-off cost (several full
/// root computations and host reads), not for a per-step path.
RootMethodChoice choose_root_method(
    const at::Tensor& matrices, int64_t p, const InverseRootOptions& options, InverseRootWorkspace& workspace);

/// Bytes of temporaries choose_root_method() holds at once on `count` (b × b)
/// float32 matrices on `device` with an empty workspace: the most any candidate's
/// inverse_root() holds (inverse_root_workspace_bytes(), <dash/solver_cost.h>), a
/// held root, and the float64 reference roots of its sample.
int64_t choose_root_method_workspace_bytes(
    int64_t count, int64_t b, const InverseRootOptions& options, const at::Device& device);

}  // namespace dash
