// Names of the optimizer enums (declared with them in <dash/optimizer_options.h>).

#include <dash/optimizer_options.h>

#include "common/name_table.h"

#include <string>

namespace dash {
namespace {

const common::NameTable<PreconditionerType> kPreconditionerNames = {
    {"shampoo", PreconditionerType::Shampoo},
    {"spectral_descent", PreconditionerType::SpectralDescent},
};
const common::NameTable<GraftingType> kGraftingTypeNames = {
    {"adam", GraftingType::Adam},
    {"rmsprop", GraftingType::RMSprop},
    {"adagrad", GraftingType::AdaGrad},
    {"sgd", GraftingType::SGD},
    {"none", GraftingType::None},
};
const common::NameTable<Execution> kExecutions = {
    {"auto", Execution::Auto},
    {"batched", Execution::Batched},
    {"sequential", Execution::Sequential},
};
const common::NameTable<OneDimensional> kOneDimensional = {
    {"adamw", OneDimensional::AdamW},
    {"shampoo-1d", OneDimensional::Shampoo1D},
};
const common::NameTable<NonFiniteGradients> kNonFiniteGradients = {
    {"error", NonFiniteGradients::Error},
    {"skip-step", NonFiniteGradients::SkipStep},
    {"unchecked", NonFiniteGradients::Unchecked},
};

}  // namespace

std::string to_string(PreconditionerType family) { return common::name_of(kPreconditionerNames, family); }
std::string to_string(GraftingType grafting) { return common::name_of(kGraftingTypeNames, grafting); }
std::string to_string(Execution execution) { return common::name_of(kExecutions, execution); }
std::string to_string(OneDimensional treatment) { return common::name_of(kOneDimensional, treatment); }
std::string to_string(NonFiniteGradients policy) { return common::name_of(kNonFiniteGradients, policy); }

PreconditionerType parse_preconditioner_type(const std::string& name) {
  return common::parse(kPreconditionerNames, name, "preconditioner family");
}
GraftingType parse_grafting_type(const std::string& name) {
  return common::parse(kGraftingTypeNames, name, "grafting type");
}
Execution parse_execution(const std::string& name) { return common::parse(kExecutions, name, "execution"); }
OneDimensional parse_one_dimensional(const std::string& name) {
  return common::parse(kOneDimensional, name, "one-dimensional treatment");
}
NonFiniteGradients parse_non_finite_gradients(const std::string& name) {
  return common::parse(kNonFiniteGradients, name, "non-finite-gradient policy");
}

}  // namespace dash
