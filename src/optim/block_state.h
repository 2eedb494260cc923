#pragma once

// What the per-block arithmetic of a step (block_update.h, grafting.h, the
// preconditioner families) works on: the step's scalar hyper-parameters, a run of
// blocks' moments, and its scratch tensors. Plain structs, so that every unit of
// the arithmetic includes this header and none includes another's.

#include <dash/optimizer_options.h>

#include <ATen/core/Tensor.h>

namespace dash::optim {

/// The scalar hyper-parameters of a step, from the group's options.
struct StepHyper {
  double beta_grad = 0.9;
  double beta_graft = 0.95;
  double eps_graft = 1e-8;
  GraftingType grafting = GraftingType::Adam;
  bool bias_correction = true;
  double momentum = 0.0;
  bool nesterov = false;
};

/// Per-block state besides the family's; every tensor is (n, rows, cols) except
/// `steps` (n, 1, 1), the step count t of each block (already incremented). Its
/// fields, their entry names and the values they may hold: moment_fields
/// (optim/state_fields.h).
struct MomentState {
  at::Tensor grad_ema;    ///< M (EMA of G with β_G)
  at::Tensor graft_stat;  ///< A (undefined for SGD and None grafting)
  at::Tensor momentum;    ///< B_m (undefined when μ = 0)
  at::Tensor steps;
  /// 1 − β_G^t and 1 − β_g^t of each block, where the caller computed them over a
  /// whole stack of which these blocks are a chunk: an element-wise exp runs in
  /// SIMD lanes or in a loop's scalar tail depending on where an element sits, so
  /// a block's value would depend on its chunk. Undefined: computed from `steps`.
  at::Tensor grad_correction{};
  at::Tensor stat_correction{};
};

/// Scratch tensors of a run of blocks, each (n, rows, cols). The batched path keeps
/// them per stack across steps so that a step allocates no stack-sized tensors;
/// there `product` shares memory with the gathered gradient (dead by then) and
/// `direction` with `ghat` (dead once L̄ Ĝ is formed).
struct Workspace {
  at::Tensor ghat;
  at::Tensor graft;
  at::Tensor product;
  at::Tensor direction;
  /// 16-bit preconditioning only (roots given in 16 bits): Ĝ rounded, then L̄ Ĝ R̄;
  /// and L̄ Ĝ. Undefined otherwise.
  at::Tensor ghat_operand{};
  at::Tensor product_operand{};
  /// (n, 1, 1): ‖P_g‖_F and ‖U‖_F of each block, for the grafting's rescale (made
  /// where undefined).
  at::Tensor graft_norms{};
  at::Tensor direction_norms{};

  /// Fresh buffers shaped like `like`.
  static Workspace like(const at::Tensor& like);
};

/// 1 − β^t for step counts t, into `out` (shaped like `steps`; made on first use,
/// then rewritten in place: a step allocates nothing for it); ones when `enabled`
/// is false. Returns `out`.
at::Tensor& bias_correction_into(at::Tensor& out, double beta, const at::Tensor& steps, bool enabled);

/// `given` (a MomentState's precomputed correction) when defined, else
/// 1 − β^t computed afresh from state.steps (bias_correction_into).
at::Tensor bias_correction_of(const at::Tensor& given, double beta, const MomentState& state, bool enabled);

}  // namespace dash::optim
