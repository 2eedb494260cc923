#include "optim/families/spectral_descent.h"

#include "linalg/newton_schulz.h"
#include "optim/dash_options.h"
#include "optim/step_context.h"

#include <ATen/ATen.h>

#include <cmath>

namespace dash::optim {
namespace {

class SpectralDescent final : public Preconditioner {
 public:
  explicit SpectralDescent(const blocking::StackPlan& plan) : plan_(plan) {}

  // No state of its own: nothing to show, load, convert or adopt.
  void block_entries(size_t, int64_t, const std::string&, const DashOptions&, ParameterState&) const override {}
  bool is_block_field(const std::string&) const override { return false; }
  void load_block_entries(size_t, int64_t, size_t, const std::string&, const SavedEntries&) override {}
  void finish_loading() override {}
  void for_each_state_tensor(const std::function<void(const at::Tensor&)>&) const override {}
  void convert_precision(const StepContext&) override {}
  void adopt(Preconditioner&) override {}

  bool keeps_statistics() const override { return false; }
  void update_statistics(StepContext&, size_t, const Rows&, const at::Tensor&, FamilyBuffers&) override {}
  void refresh(StepContext&, FamilyBuffers&) override {}

  // NS(Ĝ) into the gradient's buffer (dead once Ĝ is formed), scaled for tall blocks.
  at::Tensor direction(StepContext& context, size_t s, const Rows&, Workspace& work, FamilyBuffers& buffers) override {
    const auto& stack = plan_.gradient_stacks[s];
    const auto& options = context.options(stack.group);
    linalg::newton_schulz_into(
        work.product, work.ghat, options.newton_schulz_steps(), options.preconditioning_precision(), buffers.blocks);
    if (stack.rows > stack.cols) work.product.mul_(std::sqrt(static_cast<double>(stack.rows) / stack.cols));
    return work.product;
  }

  ChunkBytes chunk_bytes_per_block(
      const blocking::GradientStack& stack, const DashOptions& options, bool) const override {
    return {0, linalg::newton_schulz_bytes_per_matrix(stack.rows, stack.cols, options.preconditioning_precision())};
  }

  void diagnose(const std::vector<torch::optim::OptimizerParamGroup>&, DashDiagnostics&) const override {}
  int64_t workspace_bytes() const override { return 0; }
  void failure_records(
      const std::vector<torch::optim::OptimizerParamGroup>&, std::vector<FailureRecord>&) const override {}
  const at::Tensor& resets_total() const override { return no_resets_; }

 private:
  const blocking::StackPlan& plan_;
  const at::Tensor no_resets_;  ///< undefined: Newton–Schulz restarts nothing
};

}  // namespace

std::unique_ptr<Preconditioner> make_spectral_descent(const blocking::StackPlan& plan) {
  return std::make_unique<SpectralDescent>(plan);
}

}  // namespace dash::optim
