// JAX's exact GELU, as jax 0.10.2 lowers jax.nn.gelu(x, approximate=False) for f32[65536]
// (testdata/jax_gelu_erf_f32.hlo: x/2 erfc(-x/sqrt 2), erfc spelled out by StableHLO's CHLO
// legalization): the matcher finds its erfc and nothing like it, and the compiled module is
// within a few ulp of GELU computed in double precision from the same f32 argument of erfc,
// over the line, the tails and the special values. TensorFlow's 0.5 x (1 + erf(x c)) too.
#include "compiler/passes/erfc_expansion.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen_test_util.h"

namespace xlens {
namespace {

std::string GeluText() {
  std::ifstream in(std::string(XLENS_TESTDATA_DIR) + "/jax_gelu_erf_f32.hlo");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const HloInstruction* Find(const HloModule& module, const std::string& name) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->name() == name) return i;
  }
  return nullptr;
}

TEST(ErfcExpansionTest, FindsJaxErfcAndItsArgument) {
  auto module = ParseHloModule(GeluText());
  ASSERT_TRUE(module.ok()) << module.status().message();
  // ROOT mul.9 = multiply(mul.7, erfc.179): erfc.179 is erfc's last select, of mul.8 = -x c.
  const HloInstruction* erfc = Find(**module, "erfc.179");
  ASSERT_NE(erfc, nullptr);
  EXPECT_EQ(MatchErfcExpansionF32(*erfc), Find(**module, "mul.8"));
  // Nothing else in it is an erfc: not the root, not the inner selects.
  for (const char* other : {"mul.9", "erfc.161", "erfc.158", "erfc.155"}) {
    const HloInstruction* i = Find(**module, other);
    ASSERT_NE(i, nullptr) << other;
    EXPECT_EQ(MatchErfcExpansionF32(*i), nullptr) << other;
  }
}

TEST(ErfcExpansionTest, OneConstantOffByAnUlpIsNotErfc) {
  // R's last coefficient 0.564189494 -> 0.564189553, its next float; and 1 < |z| -> 1 <= |z|.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"constant(0.564189494)",
                                                                     "constant(0.564189553)"},
                                 {"direction=LT", "direction=LE"}}) {
    std::string text = GeluText();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok()) << module.status().message();
    EXPECT_EQ(MatchErfcExpansionF32(*Find(**module, "erfc.179")), nullptr) << to;
  }
}

int64_t OrderedBits(float f) {
  const int32_t i = std::bit_cast<int32_t>(f);
  return i >= 0 ? int64_t{i} : -int64_t{i & 0x7fffffff};
}

// The most ulp by which `text`'s module, run on 65536 points of [-12.9, 17.1] and the special
// values, is off x/2 erfc(-x c) computed in double precision from the module's own f32 x c
// (c = 1/sqrt 2 in f32). Below -12.9 the result nears the smallest normal float, which the
// runtime's flush of subnormals (compiler/support/float_environment.h) makes 0 on either side.
int64_t WorstUlpOfGelu(const std::string& text) {
  const float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                          1.0f, -1.0f, 1.41421354f, -1.41421354f, 2.82842708f, -2.82842708f,
                          -12.9f, 1e-30f, -1e-30f, 1e30f, -1e30f};
  const size_t sweep = 65536 - x.size();
  for (size_t i = 0; i < sweep; ++i) {
    x.push_back(-12.9f + 30.0f * static_cast<float>(i) / static_cast<float>(sweep - 1));
  }
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, x));
  auto got = testing::CompileAndRun(text, args);
  EXPECT_TRUE(got.ok()) << got.status().message();
  if (!got.ok()) return -1;
  auto y = got->data<float>();
  int64_t worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float u = x[i] * 0.707106769f;
    const float want = static_cast<float>(static_cast<double>(x[i] * 0.5f) *
                                          std::erfc(-static_cast<double>(u)));
    if (std::isnan(want) || std::isnan(y[i])) {
      EXPECT_EQ(std::isnan(want), std::isnan(y[i])) << "gelu(" << x[i] << ") = " << y[i];
      continue;
    }
    const int64_t ulp = std::abs(OrderedBits(want) - OrderedBits(y[i]));
    if (ulp > worst) {
      worst = ulp;
      worst_x = x[i];
    }
  }
  std::printf("at most %lld ulp from double precision (at x = %g) over %zu inputs\n",
              static_cast<long long>(worst), worst_x, x.size());
  return worst;
}

TEST(ErfcExpansionTest, CompiledJaxGeluIsWithinSixUlpOfDoublePrecision) {
  EXPECT_LE(WorstUlpOfGelu(GeluText()), 6);
}

// TensorFlow's form, 0.5 x (1 + erf(x c)), is computed as x/2 erfc(-x c): 1 + erf(x c) below
// x = -4 would keep only the few bits by which erf(x c) differs from -1.
TEST(ErfcExpansionTest, OnePlusErfIsErfcOfTheNegation) {
  const char* text = R"(HloModule tf_gelu
ENTRY e {
  x = f32[65536] parameter(0)
  half = f32[] constant(0.5)
  halves = f32[65536] broadcast(half), dimensions={}
  hx = f32[65536] multiply(halves, x)
  c = f32[] constant(0.707106769)
  cs = f32[65536] broadcast(c), dimensions={}
  u = f32[65536] multiply(x, cs)
  e = f32[65536] erf(u)
  one = f32[] constant(1)
  ones = f32[65536] broadcast(one), dimensions={}
  p = f32[65536] add(ones, e)
  ROOT r = f32[65536] multiply(hx, p)
})";
  EXPECT_LE(WorstUlpOfGelu(text), 6);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  bool negated = false;
  EXPECT_EQ(MatchOnePlusOrMinusErfF32(*Find(**module, "p"), &negated), Find(**module, "u"));
  EXPECT_TRUE(negated);
  EXPECT_EQ(MatchOnePlusOrMinusErfF32(*Find(**module, "r"), &negated), nullptr);
}

}  // namespace
}  // namespace xlens
