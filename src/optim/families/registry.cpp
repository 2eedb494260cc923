#include "optim/families/registry.h"

#include "optim/families/shampoo.h"
#include "optim/families/spectral_descent.h"

#include <c10/util/Exception.h>

namespace dash::optim {

std::unique_ptr<Preconditioner> make_preconditioner(PreconditionerType type, const blocking::StackPlan& plan,
    const std::vector<torch::optim::OptimizerParamGroup>& groups, const at::TensorOptions& to) {
  switch (type) {
    case PreconditionerType::Shampoo:
      return make_shampoo(plan, groups, to);
    case PreconditionerType::SpectralDescent:
      return make_spectral_descent(plan);
  }
  TORCH_CHECK(false, "dash::Dash: unknown preconditioner family ", static_cast<int>(type));
}

}  // namespace dash::optim
