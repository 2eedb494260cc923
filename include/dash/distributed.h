#pragma once

#if defined(DASH_LAYER_KERNELS) || defined(DASH_LAYER_LINALG) || defined(DASH_LAYER_BLOCKING)
#error "dash layering: <dash/distributed.h> belongs to the distributed layer (docs/architecture.md)"
#endif

// Distributed DASH (the "D" of arXiv 2602.02016) over LibTorch's c10d: Gloo on
// CPU, NCCL on CUDA. Give dash::Dash a DistributedContext and each rank keeps the
// state of, and computes the update for, its share of the blocks; one all-gather
// per step gives every rank all updates, and the parameters stay identical.
//
//   auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
//   auto group = dash::make_gloo_process_group(store, rank, world_size);
//   dash::Dash optimizer(params, options, std::make_shared<dash::DistributedContext>(group));
//
// DistributionScheme says where the gradients come from: already identical on all
// ranks (Replicated, the default: all-reduced by the training loop, e.g. DDP or
// DistributedContext::average), or each rank's own, averaged by dash (Zero).

#include <dash/process_group.h>

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10d {
class Store;
}  // namespace c10d

namespace dash {

/// Element type of the updates distributed DASH exchanges. 16-bit halves the bytes
/// sent and rounds each update to 8 (bf16) or 11 (fp16) significant bits.
enum class CommunicationDtype { FP32, BF16, FP16 };

/// How the ranks' gradients reach the blocks they own.
enum class DistributionScheme {
  /// Every rank holds the same, already averaged gradients at step(): one all-gather
  /// of the updates per step (plus the training loop's all-reduce before it).
  Replicated,
  /// Every rank holds its own gradients; dash averages them so that each rank receives
  /// only its blocks' (ZeRO-2's reduce-scatter, as one all-to-all), and then all-gathers
  /// the updates: about 2/3 of Replicated's bytes at 2 ranks. The averaged gradients
  /// are written back into the blocks a rank owns; the rest of its gradients stay its own.
  Zero,
  /// Every rank holds parameters of its own, its local shards of parameters sharded by
  /// FSDP, with their gradients already averaged (FSDP's reduce-scatter): it
  /// preconditions blocks within its own tensors and updates them itself
  /// (Distributed Shampoo's FSDP mode). Nothing is exchanged but the step's decisions
  /// (skip, raise, the root-failure limit), one small all-reduce; the ranks'
  /// parameters may differ in shape (uneven shards). Each block is then a block of
  /// a shard: docs/python.md, "FSDP".
  LocalShards,
};

struct DistributedOptions {
  /// Element type of the exchanged updates (Zero's gradients are exchanged in float32).
  TORCH_ARG(CommunicationDtype, communication_dtype) = CommunicationDtype::FP32;
  TORCH_ARG(DistributionScheme, scheme) = DistributionScheme::Replicated;
  /// A collective not finished after this long fails with an error (e.g. a rank died).
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(5);
};

/// A process group and how dash uses it.
class DistributedContext {
 public:
  explicit DistributedContext(c10::intrusive_ptr<ProcessGroup> group, DistributedOptions options = {});

  int64_t rank() const;
  int64_t world_size() const;
  ProcessGroup& group() const { return *group_; }
  const DistributedOptions& options() const { return options_; }

  /// Averages `tensors` over the ranks in place: one all-reduce of one flat buffer
  /// (data-parallel gradients). Tensors must be float32 and on one device.
  void average(const std::vector<at::Tensor>& tensors) const;

  /// Raises, on every rank, an error naming `what` unless all ranks passed the same
  /// `description` (compared by a 64-bit hash; one all-reduce of a tensor on `device`).
  void check_same_on_all_ranks(const std::string& description, const at::Device& device, const std::string& what) const;

 private:
  c10::intrusive_ptr<ProcessGroup> group_;
  DistributedOptions options_;
};

/// Whether this build of dash can make Gloo groups (make_gloo_process_group): false
/// where the LibTorch it was built against has no Gloo headers (PyTorch's pip wheels).
bool gloo_available();

/// A Gloo group of `world_size` ranks meeting at `store`. `hostname` is the address
/// this rank is reached at ("127.0.0.1" for local ranks). Raises where
/// gloo_available() is false.
c10::intrusive_ptr<ProcessGroup> make_gloo_process_group(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
    int64_t world_size, std::chrono::milliseconds timeout = std::chrono::minutes(5),
    const std::string& hostname = "127.0.0.1");

/// torchrun's environment: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE.
struct RankEnvironment {
  std::string master_addr;
  int64_t master_port = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  /// TORCHELASTIC_USE_AGENT_STORE=True: a launcher hosts the TCPStore, rank 0 does not.
  bool store_hosted_by_launcher = false;
};

/// The environment's ranks; nullopt when neither RANK nor WORLD_SIZE is set. A
/// missing or malformed variable is an error that names it.
std::optional<RankEnvironment> rank_environment();

/// Connects to (or, as rank 0, hosts) the TCPStore at MASTER_ADDR:MASTER_PORT and
/// makes a Gloo group on it.
c10::intrusive_ptr<ProcessGroup> gloo_process_group_from_environment(
    const RankEnvironment& environment, std::chrono::milliseconds timeout = std::chrono::minutes(5));

/// The name of a communication dtype, and the reverse ("fp32", "bf16", "fp16"),
/// case-insensitive; an unknown name is a c10::Error listing the valid ones.
std::string to_string(CommunicationDtype dtype);
CommunicationDtype parse_communication_dtype(const std::string& name);

/// The name of a distribution scheme ("replicated", "zero"), and the reverse.
std::string to_string(DistributionScheme scheme);
DistributionScheme parse_distribution_scheme(const std::string& name);

}  // namespace dash
