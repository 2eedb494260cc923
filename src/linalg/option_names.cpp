// Names of the solver enums (declared with them in <dash/root_options.h>).

#include <dash/root_options.h>

#include "common/name_table.h"

#include <string>

namespace dash {
namespace {

const common::NameTable<RootMethod> kRootMethods = {
    {"evd", RootMethod::EVD},
    {"cn", RootMethod::CoupledNewton},
    {"ndb", RootMethod::NewtonDB},
    {"chebyshev", RootMethod::Chebyshev},
    {"auto", RootMethod::Auto},
    {"coupled-newton", RootMethod::CoupledNewton},
    {"newton-db", RootMethod::NewtonDB},
};
const common::NameTable<EigenHeuristic> kEigenHeuristics = {
    {"shampoo", EigenHeuristic::Shampoo},
    {"abs", EigenHeuristic::Abs},
    {"abs-add", EigenHeuristic::AbsAdd},
    {"pseudo-inverse", EigenHeuristic::PseudoInverse},
};
const common::NameTable<Scaling> kScalings = {
    {"fro", Scaling::Frobenius},
    {"pi", Scaling::PowerIteration},
    {"multi-pi", Scaling::MultiPowerIteration},
    {"frobenius", Scaling::Frobenius},
    {"power-iteration", Scaling::PowerIteration},
    {"multi-power-iteration", Scaling::MultiPowerIteration},
};
const common::NameTable<NewtonDBPolynomial> kNewtonDBPolynomials = {
    {"newton-schulz", NewtonDBPolynomial::NewtonSchulz},
    {"minimax3", NewtonDBPolynomial::Minimax3},
    {"minimax5", NewtonDBPolynomial::Minimax5},
};
const common::NameTable<NewtonDBEvaluation> kNewtonDBEvaluations = {
    {"matmuls", NewtonDBEvaluation::Matmuls},
    {"eigh", NewtonDBEvaluation::Eigh},
    {"auto", NewtonDBEvaluation::Auto},
};
const common::NameTable<MatmulPrecision> kPrecisions = {
    {"fp32", MatmulPrecision::FP32},
    {"fp16", MatmulPrecision::FP16},
    {"bf16", MatmulPrecision::BF16},
};

}  // namespace

std::string to_string(RootMethod method) { return common::name_of(kRootMethods, method); }
std::string to_string(EigenHeuristic heuristic) { return common::name_of(kEigenHeuristics, heuristic); }
std::string to_string(Scaling scaling) { return common::name_of(kScalings, scaling); }
std::string to_string(NewtonDBPolynomial polynomial) { return common::name_of(kNewtonDBPolynomials, polynomial); }
std::string to_string(NewtonDBEvaluation evaluation) { return common::name_of(kNewtonDBEvaluations, evaluation); }
std::string to_string(MatmulPrecision precision) { return common::name_of(kPrecisions, precision); }

RootMethod parse_root_method(const std::string& name) { return common::parse(kRootMethods, name, "root method"); }
EigenHeuristic parse_eigen_heuristic(const std::string& name) {
  return common::parse(kEigenHeuristics, name, "eigen heuristic");
}
Scaling parse_scaling(const std::string& name) { return common::parse(kScalings, name, "scaling"); }
NewtonDBPolynomial parse_newton_db_polynomial(const std::string& name) {
  return common::parse(kNewtonDBPolynomials, name, "NewtonDB polynomial");
}
NewtonDBEvaluation parse_newton_db_evaluation(const std::string& name) {
  return common::parse(kNewtonDBEvaluations, name, "NewtonDB evaluation");
}
MatmulPrecision parse_matmul_precision(const std::string& name) {
  return common::parse(kPrecisions, name, "matmul precision");
}

}  // namespace dash
