#pragma once

#if defined(DASH_LAYER_KERNELS) || defined(DASH_LAYER_LINALG) || defined(DASH_LAYER_BLOCKING) || \
    defined(DASH_LAYER_DISTRIBUTED)
#error "dash layering: <dash/optimizer_options.h> belongs to the optim layer (docs/architecture.md)"
#endif

// What dash::Dash (<dash/optimizer.h>) takes: DashOptions, the optimizer's enums and
// their names. The inverse-root options it composes are <dash/root_options.h>.

#include <dash/root_options.h>

#include <torch/arg.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <tuple>

namespace dash {

/// The least workspace a fractional DashOptions::workspace_limit resolves to.
constexpr int64_t kWorkspaceFloorBytes = int64_t{16} << 20;

/// The preconditioner family whose arithmetic turns a block's gradient statistics
/// into its direction (src/optim/preconditioner.h; docs/architecture.md, "Where to
/// add a preconditioner family"). The engine around it — blocking, grafting,
/// momentum, weight decay, workspace chunks, the failure policy, distribution,
/// checkpoints — is every family's.
/// (The values are stored in checkpoints: new ones go at the end.)
enum class PreconditionerType {
  Shampoo,  ///< root-inverse Shampoo: L̄ Ĝ R̄ with L̄, R̄ inverse roots of the factors (spec §4)
  /// spectral descent, Muon's update: Ĝ orthogonalised by Newton–Schulz, times
  /// max(1, rows/cols)^½ (src/optim/families/spectral_descent.h)
  SpectralDescent,
};

/// Every preconditioner family: the one list the family contract suite
/// (tests/optim/test_preconditioner_contract.cpp), dash-bench, Python's
/// dash.preconditioners() and dash-train iterate.
inline constexpr PreconditionerType kPreconditioners[] = {
    PreconditionerType::Shampoo, PreconditionerType::SpectralDescent};

/// What a family does that a tool sweeping options needs to know.
struct PreconditionerTraits {
  bool inverse_roots;  ///< computes inverse roots (the `root` options, root_frequency apply)
};

constexpr PreconditionerTraits preconditioner_traits(PreconditionerType family) {
  return {family == PreconditionerType::Shampoo};
}

/// Direction whose per-block norm the Shampoo update is scaled to (spec §4 step 6).
enum class GraftingType { Adam, RMSprop, AdaGrad, SGD, None };

/// Every grafting type: the one list the tests iterate (the grafting contract suite,
/// tests/optim/test_grafting_contract.cpp, and the name round trip).
inline constexpr GraftingType kGraftingTypes[] = {
    GraftingType::Adam, GraftingType::RMSprop, GraftingType::AdaGrad, GraftingType::SGD, GraftingType::None};

/// What happens to parameters that are 1-D after squeezing size-1 dimensions.
enum class OneDimensional {
  AdamW,      ///< AdamW with `adamw_betas` / `adamw_eps` (0-D parameters always use it)
  Shampoo1D,  ///< segments of ≤ block_size, one factor L = EMA(g gᵀ) each, root 2
};

/// How the blocks are processed.
/// (The values are stored in checkpoints: new ones go at the end.)
enum class Execution {
  Batched,     ///< one batched call per stack (DASH)
  Sequential,  ///< one block at a time, per-matrix calls (the Distributed Shampoo baseline)
  /// Batched, except that each factor stack's inverse roots are computed batched or
  /// one block at a time, whichever a timing at that stack's second root computation
  /// finds faster on the device in use (kept from then on, saved in checkpoints,
  /// shown in diagnostics()). On a CPU both ways give bitwise the same roots.
  Auto,
};

/// What a non-finite gradient does. Error and SkipStep check the gradients of every
/// step (and skip steps whose gradients would overflow the float32 statistics), and
/// the step reads one scalar back (on CUDA, the host waits there for the gradients).
/// Unchecked checks nothing, as torch.optim's optimizers: a non-finite gradient, or
/// a finite one above the overflow bound, reaches the state and can make the
/// parameters NaN. In one process, a step of only such groups, none with a root
/// failure limit, reads nothing back: the host need not wait for the gradients
/// (ranks still decide together every step).
enum class NonFiniteGradients { Error, SkipStep, Unchecked };

struct DashOptions : public torch::optim::OptimizerCloneableOptions<DashOptions> {
  using betas_t = std::tuple<double, double>;

  DashOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor): like AdamWOptions

  TORCH_ARG(double, lr) = 1e-3;
  /// The preconditioner family of the group's blocks.
  TORCH_ARG(PreconditionerType, preconditioner) = PreconditionerType::Shampoo;
  /// β_G: EMA of the gradient (momentum of Ĝ).
  TORCH_ARG(double, beta_grad) = 0.9;
  /// β_LR: EMA of the factors L, R; 1 means plain sums (AdaGrad style).
  TORCH_ARG(double, beta_factor) = 0.95;
  /// β_g: EMA of the grafting statistic (Adam, RMSprop).
  TORCH_ARG(double, beta_graft) = 0.95;
  TORCH_ARG(double, eps_graft) = 1e-8;
  TORCH_ARG(int64_t, block_size) = 1024;
  /// f: inverse roots are recomputed at start_step and every f steps after it.
  TORCH_ARG(int64_t, root_frequency) = 10;
  /// t_start: first preconditioned step; before it the step is the grafting direction.
  TORCH_ARG(int64_t, start_step) = 10;
  /// Solver, scaling, precision and ε of the inverse roots.
  TORCH_ARG(InverseRootOptions, root) = InverseRootOptions();
  /// Root per side; 0: 4 for matrices (spec's L^{-1/4} G R^{-1/4}), 2 for 1-D Shampoo.
  TORCH_ARG(int64_t, exponent_override) = 0;
  TORCH_ARG(GraftingType, grafting) = GraftingType::Adam;
  TORCH_ARG(double, momentum) = 0.0;
  TORCH_ARG(bool, nesterov) = false;
  /// Decoupled weight decay W ← W(1 − lr·wd), of every parameter of the group (as
  /// torch.optim.AdamW and Distributed Shampoo: scripts exclude biases and norms by
  /// putting them in a group with weight_decay 0).
  TORCH_ARG(double, weight_decay) = 0.0;
  /// Whether 1-D (and 0-D) parameters are decayed too; false decays only the
  /// matrices (dash's default before 2026-12-06, which old checkpoints keep).
  TORCH_ARG(bool, decay_one_dimensional) = true;
  TORCH_ARG(bool, bias_correction) = true;
  TORCH_ARG(OneDimensional, one_dimensional) = OneDimensional::AdamW;
  TORCH_ARG(betas_t, adamw_betas) = std::make_tuple(0.9, 0.95);
  TORCH_ARG(double, adamw_eps) = 1e-8;
  TORCH_ARG(Execution, execution) = Execution::Auto;
  TORCH_ARG(NonFiniteGradients, non_finite_gradients) = NonFiniteGradients::Error;
  /// Bounded failures: once some factor's inverse root has failed this many root
  /// computations in a row (a failed root keeps the previous one), the next step()
  /// raises before it changes anything. 0: never (the default). Checked within the
  /// step's one read back; single process only (an error with several ranks).
  TORCH_ARG(int64_t, max_consecutive_root_failures) = 0;
  /// Operand precision of the preconditioning products L̄ Ĝ R̄ (spec §4 step 7): FP32,
  /// or BF16, which rounds Ĝ, the roots and each product to bfloat16, for twice the
  /// matmul rate or more where bfloat16 is native (GPU tensor cores, CPUs with
  /// AVX512-BF16 or AMX; elsewhere it can be slower: measure). A step's direction is
  /// then about 0.5 % off the float32 one, more in the first steps
  /// (docs/benchmarks.md, "bfloat16 preconditioning"). The factors and their roots
  /// are still computed in float32. FP16 is refused: L̄ Ĝ R̄ can exceed its range.
  TORCH_ARG(MatmulPrecision, preconditioning_precision) = MatmulPrecision::FP32;
  /// The memory a step may use besides the optimizer state: its reusable buffers
  /// and its temporaries (diagnostics().workspace_bytes and step_peak_bytes). A
  /// value in (0, 1) is a fraction of the state's bytes, at least 16 MiB
  /// (kWorkspaceFloorBytes); a value ≥ 1 a number of bytes; 0 no limit (each stack
  /// is processed whole, its gathered gradient kept through the step). Within a
  /// limit the factor updates, the roots, the grafting and the preconditioning run
  /// over chunks of each stack that fit it, half of it for the roots' solvers and half
  /// for the blocks' buffers; a chunk holds at least one block, so a limit below
  /// one block's needs is exceeded by that much. The buffers it does not divide come
  /// on top (diagnostics().unchunked_workspace_bytes: the 1-D parameters' AdamW
  /// buffers, a distributed rank's exchange buffers). With several groups the
  /// largest limit applies. On a CPU a limit changes no factor update, grafting,
  /// preconditioning or write-back, and a root at most in its last bits
  /// (docs/python.md, "Memory").
  TORCH_ARG(double, workspace_limit) = 0.1;
  /// Storage precision of the optimizer state (as Distributed Shampoo's
  /// factor_matrix_dtype and inv_factor_matrix_dtype): the Shampoo factors L, R; their
  /// inverse roots L̄, R̄; the blocks' moments (gradient EMA M, grafting statistic A,
  /// momentum B_m). FP32, or BF16, which halves that part of the state: the arithmetic
  /// stays float32 (each chunk's state is widened, updated, and rounded back to
  /// bfloat16 with round-to-nearest), so the only change is one rounding per state
  /// element per update. bfloat16 roots with a BF16 preconditioning_precision are the
  /// products' operands themselves (no rounded copy). The 1-D parameters' AdamW moments
  /// and the step counts stay float32. FP16 is refused (factors exceed its range). May
  /// change between steps: the state is converted at the next step. Training losses
  /// with each choice: docs/results.md, "16-bit optimizer state".
  TORCH_ARG(MatmulPrecision, factor_precision) = MatmulPrecision::FP32;
  TORCH_ARG(MatmulPrecision, root_precision) = MatmulPrecision::FP32;
  TORCH_ARG(MatmulPrecision, moment_precision) = MatmulPrecision::FP32;
  /// Maximise the objective instead (as torch.optim's maximize): every gradient of
  /// the group is negated when the step takes it, before any statistic sees it.
  TORCH_ARG(bool, maximize) = false;
  /// Nesterov's form of Ĝ in the family's direction: (1 − β_G)·G + β_G·Ĝ in place of
  /// Ĝ (Muon's nesterov=True, with bias_correction off; the grafting direction keeps
  /// Ĝ). Every family.
  TORCH_ARG(bool, nesterov_grad) = false;
  /// Spectral descent: iterations of Muon's quintic Newton–Schulz orthogonalisation
  /// (linalg/newton_schulz.h); 5 is Muon's.
  TORCH_ARG(int64_t, newton_schulz_steps) = 5;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override;
  void set_lr(const double lr) override;
};

// Names, for command lines, config files and reports: to_string() gives the
// canonical one; parse_*() is case-insensitive and rejects an unknown name with
// the list of valid ones (c10::Error).
std::string to_string(PreconditionerType family);
std::string to_string(GraftingType grafting);
std::string to_string(Execution execution);
std::string to_string(OneDimensional treatment);
std::string to_string(NonFiniteGradients policy);
/// "shampoo".
PreconditionerType parse_preconditioner_type(const std::string& name);
/// "adam", "rmsprop", "adagrad", "sgd", "none".
GraftingType parse_grafting_type(const std::string& name);
/// "auto", "batched", "sequential".
Execution parse_execution(const std::string& name);
/// "adamw", "shampoo-1d".
OneDimensional parse_one_dimensional(const std::string& name);
/// "error", "skip-step", "unchecked".
NonFiniteGradients parse_non_finite_gradients(const std::string& name);

}  // namespace dash
