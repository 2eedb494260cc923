#include <dash/option_names.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <utility>

namespace dash {
namespace {

template <typename Enum>
using NameTable = std::initializer_list<std::pair<const char*, Enum>>;

// The first name listed for a value is its canonical name.
const NameTable<RootMethod> kRootMethods = {
    {"evd", RootMethod::EVD},
    {"cn", RootMethod::CoupledNewton},
    {"ndb", RootMethod::NewtonDB},
    {"chebyshev", RootMethod::Chebyshev},
    {"auto", RootMethod::Auto},
    {"coupled-newton", RootMethod::CoupledNewton},
    {"newton-db", RootMethod::NewtonDB},
};
const NameTable<EigenHeuristic> kEigenHeuristics = {
    {"shampoo", EigenHeuristic::Shampoo},
    {"abs", EigenHeuristic::Abs},
    {"abs-add", EigenHeuristic::AbsAdd},
    {"pseudo-inverse", EigenHeuristic::PseudoInverse},
};
const NameTable<Scaling> kScalings = {
    {"fro", Scaling::Frobenius},
    {"pi", Scaling::PowerIteration},
    {"multi-pi", Scaling::MultiPowerIteration},
    {"frobenius", Scaling::Frobenius},
    {"power-iteration", Scaling::PowerIteration},
    {"multi-power-iteration", Scaling::MultiPowerIteration},
};
const NameTable<NewtonDBPolynomial> kNewtonDBPolynomials = {
    {"newton-schulz", NewtonDBPolynomial::NewtonSchulz},
    {"minimax3", NewtonDBPolynomial::Minimax3},
    {"minimax5", NewtonDBPolynomial::Minimax5},
};
const NameTable<MatmulPrecision> kPrecisions = {
    {"fp32", MatmulPrecision::FP32},
    {"fp16", MatmulPrecision::FP16},
    {"bf16", MatmulPrecision::BF16},
};
const NameTable<GraftingType> kGraftingTypes = {
    {"adam", GraftingType::Adam},
    {"rmsprop", GraftingType::RMSprop},
    {"adagrad", GraftingType::AdaGrad},
    {"sgd", GraftingType::SGD},
    {"none", GraftingType::None},
};
const NameTable<Execution> kExecutions = {
    {"auto", Execution::Auto},
    {"batched", Execution::Batched},
    {"sequential", Execution::Sequential},
};
const NameTable<CommunicationDtype> kCommunicationDtypes = {
    {"fp32", CommunicationDtype::FP32},
    {"bf16", CommunicationDtype::BF16},
    {"fp16", CommunicationDtype::FP16},
};
const NameTable<OneDimensional> kOneDimensional = {
    {"adamw", OneDimensional::AdamW},
    {"shampoo-1d", OneDimensional::Shampoo1D},
};
const NameTable<NonFiniteGradients> kNonFiniteGradients = {
    {"error", NonFiniteGradients::Error},
    {"skip-step", NonFiniteGradients::SkipStep},
};

template <typename Enum>
std::string name_of(const NameTable<Enum>& table, Enum value) {
  for (const auto& [name, entry] : table) {
    if (entry == value) {
      return name;
    }
  }
  TORCH_CHECK(false, "dash: enum value ", static_cast<int>(value), " has no name");
}

template <typename Enum>
Enum parse(const NameTable<Enum>& table, const std::string& name, const char* what) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string valid;
  for (const auto& [candidate, value] : table) {
    if (lower == candidate) {
      return value;
    }
    valid += valid.empty() ? candidate : std::string(", ") + candidate;
  }
  TORCH_CHECK(false, "dash: unknown ", what, " '", name, "'; valid: ", valid);
}

}  // namespace

std::string to_string(RootMethod method) { return name_of(kRootMethods, method); }
std::string to_string(EigenHeuristic heuristic) { return name_of(kEigenHeuristics, heuristic); }
std::string to_string(Scaling scaling) { return name_of(kScalings, scaling); }
std::string to_string(NewtonDBPolynomial polynomial) { return name_of(kNewtonDBPolynomials, polynomial); }
std::string to_string(MatmulPrecision precision) { return name_of(kPrecisions, precision); }
std::string to_string(GraftingType grafting) { return name_of(kGraftingTypes, grafting); }
std::string to_string(Execution execution) { return name_of(kExecutions, execution); }
std::string to_string(CommunicationDtype dtype) { return name_of(kCommunicationDtypes, dtype); }
std::string to_string(OneDimensional treatment) { return name_of(kOneDimensional, treatment); }
std::string to_string(NonFiniteGradients policy) { return name_of(kNonFiniteGradients, policy); }

RootMethod parse_root_method(const std::string& name) { return parse(kRootMethods, name, "root method"); }
EigenHeuristic parse_eigen_heuristic(const std::string& name) {
  return parse(kEigenHeuristics, name, "eigen heuristic");
}
Scaling parse_scaling(const std::string& name) { return parse(kScalings, name, "scaling"); }
NewtonDBPolynomial parse_newton_db_polynomial(const std::string& name) {
  return parse(kNewtonDBPolynomials, name, "NewtonDB polynomial");
}
MatmulPrecision parse_matmul_precision(const std::string& name) {
  return parse(kPrecisions, name, "matmul precision");
}

GraftingType parse_grafting_type(const std::string& name) { return parse(kGraftingTypes, name, "grafting type"); }
Execution parse_execution(const std::string& name) { return parse(kExecutions, name, "execution"); }
CommunicationDtype parse_communication_dtype(const std::string& name) {
  return parse(kCommunicationDtypes, name, "communication dtype");
}
OneDimensional parse_one_dimensional(const std::string& name) {
  return parse(kOneDimensional, name, "one-dimensional treatment");
}
NonFiniteGradients parse_non_finite_gradients(const std::string& name) {
  return parse(kNonFiniteGradients, name, "non-finite-gradient policy");
}

}  // namespace dash
