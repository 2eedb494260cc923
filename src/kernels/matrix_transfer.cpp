#include "kernels/matrix_transfer.h"

#include "kernels/matrix_stack.h"
#include "kernels/core_ranges.h"

#include <ATen/ATen.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace dash::kernels {
namespace {

// One matrix of a pair as the loop moves it: rows of `cols` contiguous elements,
// `to_ld` and `from_ld` elements apart. Pointers are read on the caller's thread
// (copy-on-write storages, matrix_stack.h).
struct MatrixMove {
  char* to;
  const char* from;
  int64_t rows;
  int64_t cols;
  int64_t to_ld;
  int64_t from_ld;
  at::ScalarType type;
  double scale;  // Subtract's destination scale
};

// Plain memory: a strided CPU tensor with storage, no lazy negation, no zeros
// without memory, and no tensor (a wrapper subclass, a functionalised or batched
// tensor) or dispatch mode that expects to see the op.
bool plain_cpu_memory(const at::Tensor& t) {
  return t.is_cpu() && t.layout() == at::kStrided && t.has_storage() && !t.is_neg() && !t.is_conj() &&
         !t._is_zerotensor() && !at::isTensorSubclassLike(t) && !t.key_set().has(c10::DispatchKey::Functionalize);
}

bool rows_contiguous(const at::Tensor& t) { return t.dim() == 0 || t.size(-1) <= 1 || t.stride(-1) == 1; }

bool loop_can_move(const ViewPair& pair, Transfer transfer) {
  const auto& to = pair.destination;
  const auto& from = pair.source;
  const auto type = to.scalar_type();
  const bool loop_type =
      transfer == Transfer::Copy ? at::isFloatingType(type) : (type == at::kFloat || type == at::kDouble);
  // A write autograd records (grad mode on) is ATen's: it refuses or records it.
  if (at::GradMode::is_enabled() && (to.requires_grad() || from.requires_grad())) return false;
  return plain_cpu_memory(to) && plain_cpu_memory(from) && loop_type && from.scalar_type() == type &&
         to.sizes() == from.sizes() && rows_contiguous(to) && rows_contiguous(from) && !to.is_alias_of(from) &&
         without_self_overlap(to);
}

// The pair's matrices (its last two dimensions; a vector is one row, a scalar one
// element), in order.
void append_matrices(const ViewPair& pair, std::vector<MatrixMove>& moves) {
  const auto& to = pair.destination;
  const auto& from = pair.source;
  const int64_t dim = to.dim();
  const int64_t cols = dim >= 1 ? to.size(dim - 1) : 1;
  const int64_t rows = dim >= 2 ? to.size(dim - 2) : 1;
  if (rows * cols == 0 || to.numel() == 0) return;
  const int64_t leading = std::max<int64_t>(dim - 2, 0);
  const int64_t count = to.numel() / (rows * cols);
  const auto element = static_cast<int64_t>(to.element_size());
  auto* to_data = static_cast<char*>(to.data_ptr());
  const auto* from_data = static_cast<const char*>(from.data_ptr());
  const int64_t to_ld = dim >= 2 ? to.stride(dim - 2) : 0;
  const int64_t from_ld = dim >= 2 ? from.stride(dim - 2) : 0;
  std::vector<int64_t> index(static_cast<size_t>(leading), 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t to_offset = 0;
    int64_t from_offset = 0;
    for (int64_t d = 0; d < leading; ++d) {
      to_offset += index[d] * to.stride(d);
      from_offset += index[d] * from.stride(d);
    }
    moves.push_back({to_data + to_offset * element, from_data + from_offset * element, rows, cols, to_ld, from_ld,
        to.scalar_type(), pair.destination_scale});
    for (int64_t d = leading - 1; d >= 0; --d) {  // the next leading index, last dimension fastest
      if (++index[d] < to.size(d)) break;
      index[d] = 0;
    }
  }
}

// c·d − s with the product rounded before the difference, as mul_ then sub_ round
// them: this file is compiled with -ffp-contract=off (CMakeLists.txt), and Clang is
// told so here too, so that no FMA target (-march with FMA, aarch64) fuses the two.
template <typename Scalar>
void subtract_rows(const MatrixMove& move) {
  const auto scale = static_cast<Scalar>(move.scale);  // as ATen's mul_ takes a Scalar: in the tensor's type
  for (int64_t r = 0; r < move.rows; ++r) {
    Scalar* __restrict to = reinterpret_cast<Scalar*>(move.to) + r * move.to_ld;
    const Scalar* __restrict from = reinterpret_cast<const Scalar*>(move.from) + r * move.from_ld;
    if (move.scale == 1.0) {
      for (int64_t c = 0; c < move.cols; ++c) to[c] -= from[c];
    } else {
      for (int64_t c = 0; c < move.cols; ++c) to[c] = to[c] * scale - from[c];
    }
  }
}

void copy_rows(const MatrixMove& move) {
  const auto element = static_cast<int64_t>(c10::elementSize(move.type));
  const auto row_bytes = static_cast<size_t>(move.cols * element);
  for (int64_t r = 0; r < move.rows; ++r) {
    std::memcpy(move.to + r * move.to_ld * element, move.from + r * move.from_ld * element, row_bytes);
  }
}

// The pairs the loop cannot take: one ATen op each, the scaling one _foreach_mul_
// per distinct scale.
void aten_transfer(const std::vector<const ViewPair*>& pairs, Transfer transfer) {
  if (transfer == Transfer::Subtract) {
    std::map<double, std::vector<at::Tensor>> scaled;
    for (const auto* pair : pairs) {
      if (pair->destination_scale != 1.0) scaled[pair->destination_scale].push_back(pair->destination);
    }
    for (auto& [scale, destinations] : scaled) at::_foreach_mul_(destinations, scale);
  }
  for (const auto* pair : pairs) {
    auto to = pair->destination;
    if (transfer == Transfer::Copy) {
      to.copy_(pair->source);
    } else {
      to.sub_(pair->source.scalar_type() == to.scalar_type() ? pair->source : pair->source.to(to.scalar_type()));
    }
  }
}

}  // namespace

void transfer_matrices(const std::vector<ViewPair>& pairs, Transfer transfer) {
  std::vector<const ViewPair*> aten_pairs;
  std::vector<MatrixMove> moves;
  double bytes = 0.0;
  for (const auto& pair : pairs) {
    TORCH_CHECK(transfer == Transfer::Subtract || pair.destination_scale == 1.0,
        "dash: transfer_matrices: a copy takes no destination scale, got ", pair.destination_scale);
    if (!loop_can_move(pair, transfer)) {
      aten_pairs.push_back(&pair);
      continue;
    }
    // As an in-place ATen op does, so that autograd refuses a graph that saved the
    // old values (a parameter written back after a forward pass that used it). Views
    // share their base's counter. An inference tensor outside inference mode is
    // refused here, as ATen would refuse it, before anything is written.
    pair.destination.unsafeGetTensorImpl()->bump_version();
    append_matrices(pair, moves);
    bytes += static_cast<double>(pair.destination.numel() * pair.destination.element_size());
  }
  aten_transfer(aten_pairs, transfer);
  if (moves.empty()) return;
  const double passes = transfer == Transfer::Copy ? 2.0 : 3.0;  // bytes read and written per destination byte
  for_each_pass_range(
      static_cast<int64_t>(moves.size()), at::Device(at::kCPU), passes * bytes, [&](int64_t first, int64_t last) {
        for (int64_t k = first; k < last; ++k) {
          const auto& move = moves[static_cast<size_t>(k)];
          if (transfer == Transfer::Copy) {
            copy_rows(move);
          } else if (move.type == at::kFloat) {
            subtract_rows<float>(move);
          } else {
            subtract_rows<double>(move);
          }
        }
      });
}

}  // namespace dash::kernels
