#include "kernels/stack_reductions.h"

#include "kernels/matrix_stack.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace dash::kernels {
namespace {

// √(float32 ε): far above rounding, far below a real asymmetry.
constexpr double kTolerance = 3.4526698e-4;

// ---- ATen: any device and dtype ----

at::Tensor aten_largest_magnitude(const at::Tensor& stack) {
  // abs_(): a zero matrix's maximum(0, −0) may be −0; its magnitude is +0, as the loops give it.
  return at::maximum(stack.amax({1, 2}, /*keepdim=*/true), stack.amin({1, 2}, /*keepdim=*/true).neg()).abs_();
}

AdmittedMatrices aten_admit_matrices(
    const at::Tensor& stack, bool positive_diagonal, double diagonal_shift, Scratch& scratch) {
  auto magnitude = aten_largest_magnitude(stack);
  auto asymmetry = scratch.empty_like(stack);
  at::sub_out(asymmetry, stack, stack.transpose(1, 2));
  auto admissible = at::isfinite(magnitude) & (aten_largest_magnitude(asymmetry) <= magnitude * kTolerance);
  if (positive_diagonal) {
    auto lowest_diagonal = stack.diagonal(0, 1, 2).amin(1, /*keepdim=*/true).unsqueeze(-1);
    admissible = admissible & (lowest_diagonal >= magnitude * -kTolerance);
  }
  asymmetry = at::Tensor();  // its buffer takes the copy
  auto matrices = scratch.empty_like(stack);
  at::where_out(matrices, admissible, stack, at::eye(stack.size(-1), stack.options()));
  if (diagonal_shift != 0.0) matrices.diagonal(0, -2, -1).add_(diagonal_shift);
  return {matrices, admissible, aten_largest_magnitude(matrices)};
}

// ---- CPU loops: float32 and float64 stacks with contiguous rows ----

// The unsigned integer of a float type's width. For IEEE floats with the sign bit
// cleared, integer order is the order of magnitudes, +Inf is the largest finite
// pattern's successor and every NaN lies above it: one integer maximum (which
// vectorises, where a floating-point maximum that honours NaN does not) gives
// max |x| and whether some x was NaN or infinite.
template <typename Scalar>
using Bits = std::conditional_t<std::is_same_v<Scalar, float>, uint32_t, uint64_t>;

template <typename Scalar>
constexpr Bits<Scalar> kMagnitudeMask = std::numeric_limits<Bits<Scalar>>::max() >> 1;

template <typename Scalar>
Bits<Scalar> infinity_bits() {
  const auto infinity = std::numeric_limits<Scalar>::infinity();
  Bits<Scalar> bits;
  std::memcpy(&bits, &infinity, sizeof bits);
  return bits;
}

template <typename Scalar>
Scalar from_bits(Bits<Scalar> bits) {
  Scalar value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// One matrix of a stack: rows of `columns` contiguous entries, `ld` apart.
template <typename Scalar>
struct MatrixView {
  Scalar* data;
  int64_t rows, columns, ld;

  MatrixView(Scalar* data, int64_t rows, int64_t columns, int64_t ld)
      : data(data), rows(rows), columns(columns), ld(ld) {}
  // A writable matrix, read.
  template <typename Writable, typename = std::enable_if_t<std::is_same_v<const Writable, Scalar>>>
  explicit MatrixView(const MatrixView<Writable>& m) : MatrixView(m.data, m.rows, m.columns, m.ld) {}

  Scalar* row(int64_t r) const { return data + r * ld; }
};

// The loops below are memory-bound only where they vectorise well: an unsigned
// integer maximum needs SSE4.1 (AVX2 for 8 lanes), and x86-64's baseline SSE2
// emulates it at about a third of the speed. GCC builds them for AVX2 and for the
// baseline and picks one when the library is loaded.
// (target_clones needs the loader's ifunc support: glibc.)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define DASH_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DASH_AVX2_CLONES
#endif

// |x| as bits: comparable as integers (see Bits).
template <typename Scalar>
Bits<Scalar> magnitude_bits(Scalar x) {
  Bits<Scalar> bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & kMagnitudeMask<Scalar>;
}

// The largest |x| of the matrix as bits (above infinity_bits() when some x is NaN).
template <typename Scalar>
DASH_AVX2_CLONES Bits<Scalar> largest_magnitude_bits(const MatrixView<const Scalar>& m) {
  Bits<Scalar> largest = 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    const auto* row = m.row(r);
    for (int64_t c = 0; c < m.columns; ++c) largest = std::max(largest, magnitude_bits(row[c]));
  }
  return largest;
}

// largest_magnitude()'s value from the bits: NaN for a NaN entry, else max |x|.
template <typename Scalar>
Scalar magnitude_value(Bits<Scalar> bits) {
  return bits > infinity_bits<Scalar>() ? std::numeric_limits<Scalar>::quiet_NaN() : from_bits<Scalar>(bits);
}

// max |a_rc − a_cr| of a finite square matrix, the difference rounded as a − aᵀ
// rounds it. It is antisymmetric, so the tiles on and below the diagonal hold its
// maximum; each tile's mirror is transposed into a buffer in the first-level cache
// first, so that the comparison reads both operands along rows.
template <typename Scalar>
DASH_AVX2_CLONES Scalar largest_asymmetry(const MatrixView<const Scalar>& m) {
  constexpr int64_t kTile = 32;
  Scalar mirror[kTile * kTile];
  Bits<Scalar> largest = 0;
  for (int64_t r0 = 0; r0 < m.rows; r0 += kTile) {
    const int64_t rows = std::min(kTile, m.rows - r0);
    for (int64_t c0 = 0; c0 <= r0; c0 += kTile) {
      const int64_t columns = std::min(kTile, m.rows - c0);
      for (int64_t c = 0; c < columns; ++c) {
        const auto* source = m.row(c0 + c) + r0;
        for (int64_t r = 0; r < rows; ++r) mirror[r * kTile + c] = source[r];
      }
      for (int64_t r = 0; r < rows; ++r) {
        const auto* row = m.row(r0 + r) + c0;
        const auto* mirrored = mirror + r * kTile;
        for (int64_t c = 0; c < columns; ++c) largest = std::max(largest, magnitude_bits(row[c] - mirrored[c]));
      }
    }
  }
  return from_bits<Scalar>(largest);
}

template <typename Scalar>
Scalar lowest_diagonal(const MatrixView<const Scalar>& m) {
  Scalar lowest = std::numeric_limits<Scalar>::infinity();
  for (int64_t r = 0; r < m.rows; ++r) lowest = std::min(lowest, m.row(r)[r]);
  return lowest;
}

// admit_matrices()'s test on one finite matrix, with its bounds rounded as
// ATen rounds `magnitude * kTolerance` (in the tensor's dtype).
template <typename Scalar>
bool passes_checks(const MatrixView<const Scalar>& m, Scalar magnitude, bool positive_diagonal) {
  if (largest_asymmetry(m) > magnitude * static_cast<Scalar>(kTolerance)) return false;
  return !positive_diagonal || lowest_diagonal(m) >= magnitude * static_cast<Scalar>(-kTolerance);
}

// `in` (admissible) or the identity, with `shift` on the diagonal, into `out`.
template <typename Scalar>
void write_admitted(
    const MatrixView<Scalar>& out, const MatrixView<const Scalar>& in, bool keep, bool shifted, Scalar shift) {
  for (int64_t r = 0; r < out.rows; ++r) {
    auto* row = out.row(r);
    if (keep) {
      std::copy_n(in.row(r), out.columns, row);
    } else {
      std::fill_n(row, out.columns, Scalar(0));
      row[r] = Scalar(1);
    }
    if (shifted) row[r] += shift;
  }
}

// Matrix `i` of `stack` (read on the caller's thread, matrix_stack.h), `like`'s
// sizes.
template <typename Scalar>
MatrixView<Scalar> matrix_of(const MatrixStack<Scalar>& stack, const at::Tensor& like, int64_t i) {
  return {stack.matrix(i), like.size(1), like.size(2), stack.ld};
}

bool cpu_loops_take(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided && t.dim() == 3 &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble) && (t.size(2) <= 1 || t.stride(2) == 1) &&
         t.numel() > 0;
}

// Runs `per_matrix(i)` for every matrix of `stack` over the cores
// (for_each_pass_range), for a pass that moves `bytes_per_entry` per entry.
template <typename PerMatrix>
void for_each_matrix(const at::Tensor& stack, double bytes_per_entry, const PerMatrix& per_matrix) {
  for_each_pass_range(stack, bytes_per_entry * static_cast<double>(stack.numel()), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) per_matrix(i);
  });
}

// `run(Scalar{})` with Scalar the C++ type of `stack`'s dtype (float or double).
template <typename Run>
void with_scalar_type(const at::Tensor& stack, const Run& run) {
  if (stack.scalar_type() == at::kFloat) {
    run(float{});
  } else {
    run(double{});
  }
}

at::Tensor cpu_largest_magnitude(const at::Tensor& stack) {
  auto magnitude = at::empty({stack.size(0), 1, 1}, stack.options());
  with_scalar_type(stack, [&](auto zero) {
    using Scalar = decltype(zero);
    const auto in = readable_view<Scalar>(stack);
    auto* out = magnitude.data_ptr<Scalar>();
    for_each_matrix(stack, sizeof(Scalar),
        [&](int64_t i) { out[i] = magnitude_value<Scalar>(largest_magnitude_bits(matrix_of(in, stack, i))); });
  });
  return magnitude;
}

AdmittedMatrices cpu_admit_matrices(
    const at::Tensor& stack, bool positive_diagonal, double diagonal_shift, Scratch& scratch) {
  auto matrices = scratch.empty_like(stack);
  auto admissible = at::empty({stack.size(0), 1, 1}, stack.options().dtype(at::kBool));
  auto magnitude = at::empty({stack.size(0), 1, 1}, stack.options());
  with_scalar_type(stack, [&](auto zero) {
    using Scalar = decltype(zero);
    const auto in = readable_view<Scalar>(stack);
    const auto out = writable_view<Scalar>(matrices);
    auto* admitted = admissible.data_ptr<bool>();
    auto* magnitudes = magnitude.data_ptr<Scalar>();
    // The shift is tested as given: one that rounds to zero is still added (ATen's
    // add_ of +0.0 turns a −0.0 diagonal entry into +0.0).
    const bool shifted = diagonal_shift != 0.0;
    const auto shift = static_cast<Scalar>(diagonal_shift);
    for_each_matrix(stack, 2.0 * sizeof(Scalar), [&](int64_t i) {
      const auto matrix = matrix_of(in, stack, i);
      const auto bits = largest_magnitude_bits(matrix);
      const bool keep =
          bits < infinity_bits<Scalar>() && passes_checks(matrix, from_bits<Scalar>(bits), positive_diagonal);
      const auto copy = matrix_of(out, matrices, i);
      write_admitted(copy, matrix, keep, shifted, shift);
      admitted[i] = keep;
      magnitudes[i] = keep && !shifted
                          ? from_bits<Scalar>(bits)
                          : magnitude_value<Scalar>(largest_magnitude_bits(MatrixView<const Scalar>(copy)));
    });
  });
  return {matrices, admissible, magnitude};
}

}  // namespace

at::Tensor largest_magnitude(const at::Tensor& stack) {
  return cpu_loops_take(stack) ? cpu_largest_magnitude(stack) : aten_largest_magnitude(stack);
}

namespace {

// Bands of rows of at most this many entries: a large matrix is split over the
// cores like a stack of small ones.
constexpr int64_t kBandEntries = int64_t{1} << 16;

// The largest |x| of the float32 and float64 `stacks` (cpu_loops_take), as a
// double (NaN for a NaN entry), in one pass over the cores for all of them.
template <typename Scalar>
double cpu_largest_magnitude_of_stacks(const std::vector<at::Tensor>& stacks) {
  std::vector<MatrixView<const Scalar>> bands;
  double bytes = 0.0;
  for (const auto& stack : stacks) {
    const auto in = readable_view<Scalar>(stack);
    const int64_t rows_per_band = std::max<int64_t>(1, kBandEntries / std::max<int64_t>(stack.size(2), 1));
    for (int64_t i = 0; i < stack.size(0); ++i) {
      const auto matrix = matrix_of(in, stack, i);
      for (int64_t r = 0; r < matrix.rows; r += rows_per_band) {
        bands.emplace_back(matrix.row(r), std::min(rows_per_band, matrix.rows - r), matrix.columns, matrix.ld);
      }
    }
    bytes += static_cast<double>(stack.numel()) * sizeof(Scalar);
  }
  std::vector<Bits<Scalar>> largest(bands.size(), 0);
  for_each_pass_range(
      static_cast<int64_t>(bands.size()), at::Device(at::kCPU), bytes, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) largest[i] = largest_magnitude_bits(bands[i]);
      });
  const auto bits = largest.empty() ? Bits<Scalar>{0} : *std::max_element(largest.begin(), largest.end());
  return static_cast<double>(magnitude_value<Scalar>(bits));
}

}  // namespace

at::Tensor largest_magnitude_of_list(const std::vector<at::Tensor>& tensors, at::Tensor& buffer) {
  std::vector<at::Tensor> floats, doubles, others;
  for (const auto& tensor : tensors) {
    if (tensor.numel() == 0) continue;
    // As a stack: up to three dimensions as they are, more when contiguous (views).
    at::Tensor stack = tensor;
    while (stack.dim() < 3) stack = stack.unsqueeze(0);
    if (stack.dim() > 3 && stack.is_contiguous()) stack = stack.view({1, -1, stack.size(-1)});
    if (cpu_loops_take(stack)) {
      (stack.scalar_type() == at::kFloat ? floats : doubles).push_back(stack);
    } else {
      others.push_back(tensor);
    }
  }
  const auto device = tensors.empty() ? at::Device(at::kCPU) : tensors.front().device();
  const auto needed = static_cast<int64_t>(1 + others.size() + !floats.empty() + !doubles.empty());
  if (!buffer.defined() || buffer.numel() < needed || buffer.device() != device || buffer.scalar_type() != at::kFloat) {
    buffer = at::empty({needed}, at::TensorOptions().dtype(at::kFloat).device(device));
  }
  // Slot 0 takes the result; each magnitude a slot after it. A float32 tensor's (and
  // on CUDA a 16-bit one's, which its reduction reads as float32 without a copy) goes
  // straight into its slot: no allocation. Any other's is taken in its own dtype
  // (ATen refuses to narrow float64, and on a CPU would copy a 16-bit tensor to
  // float32 first), a 0-d tensor, then rounded into the slot as a conversion rounds.
  constexpr double kInfinityNorm = std::numeric_limits<double>::infinity();
  int64_t filled = 1;
  for (const auto& tensor : others) {
    auto slot = buffer.select(0, filled++);
    const auto dtype = tensor.scalar_type();
    if (dtype == at::kFloat || (tensor.is_cuda() && (dtype == at::kHalf || dtype == at::kBFloat16))) {
      at::linalg_vector_norm_out(slot, tensor, kInfinityNorm, at::OptionalIntArrayRef{}, false, at::kFloat);
    } else {
      slot.copy_(at::linalg_vector_norm(tensor, kInfinityNorm));
    }
  }
  auto cpu_value = [&](double value) {
    // In float32, as a conversion rounds it: beyond its range, Inf (NaN stays NaN).
    const auto single =
        value > std::numeric_limits<float>::max() ? std::numeric_limits<float>::infinity() : static_cast<float>(value);
    buffer.select(0, filled++).fill_(single);
  };
  if (!floats.empty()) cpu_value(cpu_largest_magnitude_of_stacks<float>(floats));
  if (!doubles.empty()) cpu_value(cpu_largest_magnitude_of_stacks<double>(doubles));
  auto result = buffer.select(0, 0);
  if (filled == 1) return result.zero_();
  if (filled == 2) return result.copy_(buffer.select(0, 1));
  return at::amax_out(result, buffer.narrow(0, 1, filled - 1), {0});
}

at::Tensor finite_matrices(const at::Tensor& stack) { return at::isfinite(largest_magnitude(stack)); }

AdmittedMatrices admit_matrices(
    const at::Tensor& stack, bool positive_diagonal, double diagonal_shift, Scratch& scratch) {
  TORCH_CHECK(stack.dim() == 3 && stack.size(1) == stack.size(2),
      "dash: admit_matrices: expected an (N, b, b) stack, got ", stack.sizes());
  if (cpu_loops_take(stack)) return cpu_admit_matrices(stack, positive_diagonal, diagonal_shift, scratch);
  return aten_admit_matrices(stack, positive_diagonal, diagonal_shift, scratch);
}

at::Tensor acceptable_roots(const at::Tensor& roots, double epsilon, int64_t p) {
  if (epsilon <= 0.0) return finite_matrices(roots);
  return largest_magnitude(roots) <= 2.0 * std::pow(epsilon, -1.0 / static_cast<double>(p));
}

}  // namespace dash::kernels
