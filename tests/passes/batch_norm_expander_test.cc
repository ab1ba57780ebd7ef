#include "compiler/passes/batch_norm_expander.h"

#include <cmath>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using ::testing::DoubleNear;
using ::testing::Pointwise;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;

// x: f32[2,3,2,2] with the feature dimension 1 (3 features, 8 elements each).
constexpr int64_t kFeatures = 3, kPerFeature = 8, kElements = 24;
constexpr double kEpsilon = 0.001;

int64_t FeatureOf(int64_t i) { return (i / 4) % 3; }

std::vector<double> Pattern(int64_t n, double a, double b) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = a * std::sin(1.3 * i + b) + b;
  return v;
}

Literal F32(std::vector<int64_t> dims, const std::vector<double>& values) {
  Literal literal{Shape(PrimitiveType::F32, std::move(dims))};
  for (size_t i = 0; i < values.size(); ++i) literal.data<float>()[i] = float(values[i]);
  return literal;
}

std::vector<double> Doubles(const Literal& literal) {
  auto d = literal.data<float>();
  return {d.begin(), d.end()};
}

// Expands the module (checking the pass as every pass test does) and evaluates it.
StatusOr<Literal> ExpandAndEvaluate(std::string_view text, const std::vector<Literal>& args) {
  auto module = ParseModuleOrDie(text);
  if (module == nullptr) return Error("does not parse");
  BatchNormExpander pass;
  ASSIGN_OR_RETURN(bool changed, RunPassChecked(pass, *module));
  EXPECT_TRUE(changed);
  for (HloOpcode op : {HloOpcode::kBatchNormTraining, HloOpcode::kBatchNormInference,
                       HloOpcode::kBatchNormGrad}) {
    EXPECT_EQ(CountOpcode(*module, op), 0);
  }
  ASSIGN_OR_RETURN(bool again, RunPassChecked(pass, *module));
  EXPECT_FALSE(again);
  return EvaluateModule(*module, args);
}

struct Moments {
  std::vector<double> mean, var;
};

Moments MomentsOf(const std::vector<double>& x) {
  Moments m{std::vector<double>(kFeatures), std::vector<double>(kFeatures)};
  for (int64_t i = 0; i < kElements; ++i) m.mean[FeatureOf(i)] += x[i] / kPerFeature;
  for (int64_t i = 0; i < kElements; ++i) {
    const double d = x[i] - m.mean[FeatureOf(i)];
    m.var[FeatureOf(i)] += d * d / kPerFeature;
  }
  return m;
}

TEST(BatchNormExpanderTest, TrainingNormalizesWithTheBiasedBatchVariance) {
  const std::vector<double> x = Pattern(kElements, 2, 0.5), scale = {2, 3, -1},
                            offset = {1, 2, 0.25};
  std::vector<Literal> args;
  args.push_back(F32({2, 3, 2, 2}, x));
  args.push_back(F32({3}, scale));
  args.push_back(F32({3}, offset));
  auto result = ExpandAndEvaluate(R"(HloModule m
ENTRY e {
  x = f32[2,3,2,2] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  ROOT t = (f32[2,3,2,2], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
})", args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const Moments m = MomentsOf(x);
  std::vector<double> y(kElements);
  for (int64_t i = 0; i < kElements; ++i) {
    const int64_t f = FeatureOf(i);
    y[i] = (x[i] - m.mean[f]) / std::sqrt(m.var[f] + kEpsilon) * scale[f] + offset[f];
  }
  EXPECT_THAT(Doubles(result->tuple_element(0)), Pointwise(DoubleNear(1e-5), y));
  EXPECT_THAT(Doubles(result->tuple_element(1)), Pointwise(DoubleNear(1e-6), m.mean));
  EXPECT_THAT(Doubles(result->tuple_element(2)), Pointwise(DoubleNear(1e-5), m.var));
}

TEST(BatchNormExpanderTest, InferenceUsesTheGivenMoments) {
  const std::vector<double> x = Pattern(kElements, 3, -0.2), scale = {0.5, -2, 4},
                            offset = {0, 1, -3}, mean = {0.1, -0.4, 2}, var = {1.5, 0.25, 4};
  std::vector<Literal> args;
  args.push_back(F32({2, 3, 2, 2}, x));
  for (const auto* v : {&scale, &offset, &mean, &var}) args.push_back(F32({3}, *v));
  auto result = ExpandAndEvaluate(R"(HloModule m
ENTRY e {
  x = f32[2,3,2,2] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  m = f32[3] parameter(3)
  v = f32[3] parameter(4)
  ROOT y = f32[2,3,2,2] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
})", args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::vector<double> y(kElements);
  for (int64_t i = 0; i < kElements; ++i) {
    const int64_t f = FeatureOf(i);
    y[i] = (x[i] - mean[f]) / std::sqrt(var[f] + kEpsilon) * scale[f] + offset[f];
  }
  EXPECT_THAT(Doubles(*result), Pointwise(DoubleNear(1e-5), y));
}

TEST(BatchNormExpanderTest, GradIsTheDerivativeOfTraining) {
  const std::vector<double> x = Pattern(kElements, 2, 0.3), dy = Pattern(kElements, 1, -0.7),
                            scale = {1.5, -0.5, 2};
  const Moments m = MomentsOf(x);
  std::vector<Literal> args;
  args.push_back(F32({2, 3, 2, 2}, x));
  args.push_back(F32({3}, scale));
  args.push_back(F32({3}, m.mean));
  args.push_back(F32({3}, m.var));
  args.push_back(F32({2, 3, 2, 2}, dy));
  auto result = ExpandAndEvaluate(R"(HloModule m
ENTRY e {
  x = f32[2,3,2,2] parameter(0)
  s = f32[3] parameter(1)
  m = f32[3] parameter(2)
  v = f32[3] parameter(3)
  dy = f32[2,3,2,2] parameter(4)
  ROOT g = (f32[2,3,2,2], f32[3], f32[3]) batch-norm-grad(x, s, m, v, dy), epsilon=0.001, feature_index=1
})", args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  // The textbook gradient of y = (x - mean(x)) / sqrt(var(x) + eps) * scale + offset.
  std::vector<double> sum_dy(kFeatures), sum_dy_xc(kFeatures);
  for (int64_t i = 0; i < kElements; ++i) {
    sum_dy[FeatureOf(i)] += dy[i];
    sum_dy_xc[FeatureOf(i)] += dy[i] * (x[i] - m.mean[FeatureOf(i)]);
  }
  std::vector<double> dx(kElements), dscale(kFeatures);
  for (int64_t f = 0; f < kFeatures; ++f) dscale[f] = sum_dy_xc[f] / std::sqrt(m.var[f] + kEpsilon);
  for (int64_t i = 0; i < kElements; ++i) {
    const int64_t f = FeatureOf(i);
    const double inv = 1 / std::sqrt(m.var[f] + kEpsilon);
    const double xhat = (x[i] - m.mean[f]) * inv;
    dx[i] = scale[f] * inv / kPerFeature *
            (kPerFeature * dy[i] - sum_dy[f] - xhat * sum_dy_xc[f] * inv);
  }
  EXPECT_THAT(Doubles(result->tuple_element(0)), Pointwise(DoubleNear(1e-5), dx));
  EXPECT_THAT(Doubles(result->tuple_element(1)), Pointwise(DoubleNear(1e-5), dscale));
  EXPECT_THAT(Doubles(result->tuple_element(2)), Pointwise(DoubleNear(1e-5), sum_dy));
}

TEST(BatchNormExpanderTest, EpsilonIsAFloatInEveryElementType) {
  // XLA's epsilon attribute is a float: in f64 arithmetic it is float(0.001), not 0.001.
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  x = f64[4,2] parameter(0)
  s = f64[2] parameter(1)
  o = f64[2] parameter(2)
  m = f64[2] parameter(3)
  v = f64[2] parameter(4)
  ROOT y = f64[4,2] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
})");
  ASSERT_NE(module, nullptr);
  BatchNormExpander pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  int found = 0;
  for (const HloInstruction* i : module->entry_computation()->instructions()) {
    if (i->opcode() != HloOpcode::kConstant) continue;
    EXPECT_EQ(i->literal().data<double>()[0], static_cast<double>(0.001f));
    ++found;
  }
  EXPECT_EQ(found, 1);
}

TEST(BatchNormExpanderTest, ExpansionsComputeWhatTheEvaluatorsBatchNormsDo) {
  // The evaluator's own batch norms are the oracle where it has them.
  const char* text = R"(HloModule m
ENTRY e {
  x = f32[3,4,5] parameter(0)
  s = f32[4] parameter(1)
  o = f32[4] parameter(2)
  m = f32[4] parameter(3)
  v0 = f32[4] parameter(4)
  dy = f32[3,4,5] parameter(5)
  vv = f32[4] multiply(v0, v0)
  half = f32[] constant(0.5)
  halves = f32[4] broadcast(half), dimensions={}
  v = f32[4] add(vv, halves)
  t = (f32[3,4,5], f32[4], f32[4]) batch-norm-training(x, s, o), epsilon=0.01, feature_index=1
  i = f32[3,4,5] batch-norm-inference(x, s, o, m, v), epsilon=0.01, feature_index=1
  g = (f32[3,4,5], f32[4], f32[4]) batch-norm-grad(x, s, m, v, dy), epsilon=0.01, feature_index=1
  ROOT r = ((f32[3,4,5], f32[4], f32[4]), f32[3,4,5], (f32[3,4,5], f32[4], f32[4])) tuple(t, i, g)
})";
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  auto before = xlens::testing::CloneModule(*module);
  std::vector<Literal> zeros;
  for (const HloInstruction* p : before->entry_computation()->parameter_instructions()) {
    zeros.push_back(Literal(p->shape()));
  }
  if (!EvaluateModule(*before, zeros).ok()) GTEST_SKIP() << "the evaluator has no batch norm";
  BatchNormExpander pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  // The given variances are v0 * v0 + 0.5: positive, away from zero.
  EXPECT_TRUE(xlens::testing::SameResults(*before, *module, 5, ErrorSpec{1e-4, 1e-4}));
}

TEST(BatchNormExpanderTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<BatchNormExpander>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "batchnorm-expander changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
