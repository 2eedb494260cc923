#include <dash/option_names.h>

#include <c10/util/Exception.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace dash {
namespace {

// kSolverMethods is the one list of solvers: every RootMethod but Auto, each once
// (Auto is the last enumerator), and a Newton iteration or a fixed-degree
// polynomial is a matmul-only solver.
TEST(SolverMethods, EveryMethodButAutoOnceWithConsistentTraits) {
  std::vector<int> seen(static_cast<size_t>(RootMethod::Auto) + 1, 0);
  for (auto method : kSolverMethods) ++seen.at(static_cast<size_t>(method));
  for (size_t m = 0; m < seen.size(); ++m) {
    EXPECT_EQ(seen[m], static_cast<RootMethod>(m) == RootMethod::Auto ? 0 : 1) << to_string(static_cast<RootMethod>(m));
  }
  for (auto method : kSolverMethods) {
    const auto traits = solver_traits(method);
    if (traits.newton_iteration || traits.fixed_degree) EXPECT_TRUE(traits.matmul_only) << to_string(method);
    EXPECT_FALSE(traits.newton_iteration && traits.fixed_degree) << to_string(method);
  }
  EXPECT_FALSE(solver_traits(RootMethod::EVD).matmul_only);
}

TEST(OptionNames, RoundTripAndAliases) {
  for (auto m : kSolverMethods) {
    EXPECT_EQ(parse_root_method(to_string(m)), m);
  }
  for (auto s : {Scaling::Frobenius, Scaling::PowerIteration, Scaling::MultiPowerIteration}) {
    EXPECT_EQ(parse_scaling(to_string(s)), s);
  }
  for (auto p : {MatmulPrecision::FP32, MatmulPrecision::FP16, MatmulPrecision::BF16}) {
    EXPECT_EQ(parse_matmul_precision(to_string(p)), p);
  }
  for (auto e : {NewtonDBEvaluation::Matmuls, NewtonDBEvaluation::Eigh, NewtonDBEvaluation::Auto}) {
    EXPECT_EQ(parse_newton_db_evaluation(to_string(e)), e);
  }
  EXPECT_EQ(to_string(NewtonDBEvaluation::Eigh), "eigh");
  EXPECT_EQ(to_string(NewtonDBEvaluation::Auto), "auto");
  for (auto h : {EigenHeuristic::Shampoo, EigenHeuristic::Abs, EigenHeuristic::AbsAdd, EigenHeuristic::PseudoInverse}) {
    EXPECT_EQ(parse_eigen_heuristic(to_string(h)), h);
  }
  for (auto g : kGraftingTypes) {
    EXPECT_EQ(parse_grafting_type(to_string(g)), g);
  }
  for (auto e : {Execution::Auto, Execution::Batched, Execution::Sequential})
    EXPECT_EQ(parse_execution(to_string(e)), e);
  for (auto c : {CommunicationDtype::FP32, CommunicationDtype::BF16, CommunicationDtype::FP16}) {
    EXPECT_EQ(parse_communication_dtype(to_string(c)), c);
  }
  for (auto o : {OneDimensional::AdamW, OneDimensional::Shampoo1D}) EXPECT_EQ(parse_one_dimensional(to_string(o)), o);
  for (auto n : {NonFiniteGradients::Error, NonFiniteGradients::SkipStep, NonFiniteGradients::Unchecked}) {
    EXPECT_EQ(parse_non_finite_gradients(to_string(n)), n);
  }
  EXPECT_EQ(to_string(OneDimensional::Shampoo1D), "shampoo-1d");
  EXPECT_EQ(to_string(NonFiniteGradients::SkipStep), "skip-step");
  EXPECT_EQ(to_string(GraftingType::RMSprop), "rmsprop");
  EXPECT_EQ(to_string(CommunicationDtype::BF16), "bf16");
  EXPECT_EQ(parse_root_method("Newton-DB"), RootMethod::NewtonDB);
  EXPECT_EQ(parse_scaling("POWER-ITERATION"), Scaling::PowerIteration);
}

TEST(OptionNames, UnknownNameListsTheValidOnes) {
  try {
    parse_root_method("svd");
    FAIL() << "no error";
  } catch (const c10::Error& error) {
    EXPECT_THAT(error.what_without_backtrace(), ::testing::HasSubstr("'svd'"));
    EXPECT_THAT(error.what_without_backtrace(), ::testing::HasSubstr("evd, cn, ndb"));
  }
}

}  // namespace
}  // namespace dash
