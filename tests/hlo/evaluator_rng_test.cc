// The reference evaluator on rng-bit-generator (the published known answers of Philox-4x32-10
// and ThreeFry-2x32-20, and the state XLA's expansion returns) and on triangular-solve (small
// systems solved by hand), plus the refusals of what XLA does not expand.
#include <complex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "evaluator_test_util.h"

namespace xlens {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using xlens::testing::EvaluateText;
using xlens::testing::MakeLiteral;
using xlens::testing::Values;

std::string Module(const std::string& body) { return "HloModule m\n\nENTRY e {\n" + body + "\n}\n"; }

Literal Eval(const std::string& text, const std::vector<Literal>& arguments = {}) {
  StatusOr<Literal> result = EvaluateText(text, arguments);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : Literal();
}

TEST(EvaluatorRngTest, PhiloxOfZeroKeyAndCounterIsTheKnownAnswer) {
  // Random123's known answer for Philox-4x32-10, key 0, counter 0; the next block is counter 1,
  // and the new state is (key, counter + 2 blocks, high word).
  Literal out = Eval(Module(R"(  s = u64[3] constant({0, 0, 0})
  ROOT g = (u64[3], u32[6]) rng-bit-generator(s), algorithm=rng_philox)"));
  ASSERT_EQ(out.tuple_size(), 2);
  EXPECT_THAT(Values<uint64_t>(out.tuple_element(0)), ElementsAre(0u, 2u, 0u));
  EXPECT_THAT(Values<uint32_t>(out.tuple_element(1)),
              ElementsAre(0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u, 4175744164u,
                          1555169499u));
}

TEST(EvaluatorRngTest, PhiloxCounterCarriesIntoItsHighWord) {
  // u64 values take two words each: 3 values are 2 blocks, from counter 2^64-1 to 2^64.
  Literal out = Eval(Module(R"(  s = u64[3] constant({5, 18446744073709551615, 7})
  ROOT g = (u64[3], u64[3]) rng-bit-generator(s), algorithm=rng_default)"));
  EXPECT_THAT(Values<uint64_t>(out.tuple_element(0)), ElementsAre(5u, 1u, 8u));
  // Values from jaxlib's CPU backend on the same state.
  EXPECT_THAT(Values<uint64_t>(out.tuple_element(1)),
              ElementsAre(673940803635876895u, 10955916776920449873u, 4998200121197870631u));
}

TEST(EvaluatorRngTest, PhiloxOfATwoWordStateUsesTheKeyAsTheCounterHighWord) {
  Literal two = Eval(Module(R"(  s = u64[2] constant({9, 4})
  ROOT g = (u64[2], u32[5]) rng-bit-generator(s), algorithm=rng_philox)"));
  Literal three = Eval(Module(R"(  s = u64[3] constant({9, 4, 9})
  ROOT g = (u64[3], u32[5]) rng-bit-generator(s), algorithm=rng_philox)"));
  EXPECT_THAT(Values<uint64_t>(two.tuple_element(0)), ElementsAre(9u, 6u));
  EXPECT_EQ(Values<uint32_t>(two.tuple_element(1)), Values<uint32_t>(three.tuple_element(1)));
}

TEST(EvaluatorRngTest, ThreeFryOfZeroKeyAndCounterIsTheKnownAnswer) {
  // Random123's known answer for ThreeFry-2x32-20 on zeros: 0x6b200159, 0x99ba4efe. A u64 is
  // one run; u32[3] halves its only dimension to 2 runs, words filling even and odd positions.
  Literal wide = Eval(Module(R"(  s = u64[2] constant({0, 0})
  ROOT g = (u64[2], u64[1]) rng-bit-generator(s), algorithm=rng_three_fry)"));
  EXPECT_THAT(Values<uint64_t>(wide.tuple_element(0)), ElementsAre(0u, 1u));
  EXPECT_THAT(Values<uint64_t>(wide.tuple_element(1)), ElementsAre(0x99ba4efe6b200159u));
  Literal narrow = Eval(Module(R"(  s = u64[2] constant({0, 0})
  ROOT g = (u64[2], u32[3]) rng-bit-generator(s), algorithm=rng_three_fry)"));
  EXPECT_THAT(Values<uint64_t>(narrow.tuple_element(0)), ElementsAre(0u, 2u));
  const std::vector<uint32_t> words = Values<uint32_t>(narrow.tuple_element(1));
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[0], 0x6b200159u);
  EXPECT_EQ(words[1], 0x99ba4efeu);
}

TEST(EvaluatorRngTest, RefusesStatesAndTypesXlaDoesNotExpand) {
  StatusOr<Literal> long_state = EvaluateText(Module(R"(  s = u64[4] constant({0, 0, 0, 0})
  ROOT g = (u64[4], u32[2]) rng-bit-generator(s), algorithm=rng_philox)"), {});
  ASSERT_FALSE(long_state.ok());
  EXPECT_THAT(long_state.status().message(), HasSubstr("u64[2] or u64[3]"));
  StatusOr<Literal> three_fry = EvaluateText(Module(R"(  s = u64[3] constant({0, 0, 0})
  ROOT g = (u64[3], u32[2]) rng-bit-generator(s), algorithm=rng_three_fry)"), {});
  ASSERT_FALSE(three_fry.ok());
  EXPECT_THAT(three_fry.status().message(), HasSubstr("u64[2] state"));
}

TEST(EvaluatorTriangularSolveTest, LeftLowerAndItsTransposeAndUnitDiagonal) {
  // a = [[2, 9], [1, 4]] read as lower: [[2, 0], [1, 4]]; b = [[2], [9]].
  std::vector<Literal> args;
  args.push_back(MakeLiteral<float>(PrimitiveType::F32, {2, 2}, {2, 9, 1, 4}));
  args.push_back(MakeLiteral<float>(PrimitiveType::F32, {2, 1}, {2, 9}));
  Literal out = Eval(Module(R"(  a = f32[2,2] parameter(0)
  b = f32[2,1] parameter(1)
  n = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  t = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, transpose_a=TRANSPOSE
  u = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, transpose_a=NO_TRANSPOSE
  ROOT r = (f32[2,1], f32[2,1], f32[2,1]) tuple(n, t, u))"),
                     args);
  // [[2,0],[1,4]] x = [2,9]: x = [1, 2]. [[2,1],[0,4]] x = [2,9]: x = [-1/8 ... ] = [-0.125, 2.25].
  EXPECT_THAT(Values<float>(out.tuple_element(0)), ElementsAre(1.0f, 2.0f));
  EXPECT_THAT(Values<float>(out.tuple_element(1)), ElementsAre(-0.125f, 2.25f));
  // [[1,0],[1,1]] x = [2,9]: x = [2, 7].
  EXPECT_THAT(Values<float>(out.tuple_element(2)), ElementsAre(2.0f, 7.0f));
}

TEST(EvaluatorTriangularSolveTest, RightSideUpperAdjointOfComplexBatches) {
  // x op(a) = b with a upper [[1+i, 2], [., 2i]] (the lower corner is never read), batch of 2.
  using C = std::complex<float>;
  std::vector<Literal> args;
  args.push_back(MakeLiteral<C>(PrimitiveType::C64, {2, 2, 2},
                                {C(1, 1), C(2, 0), C(99, 0), C(0, 2), C(1, 0), C(0, 0),
                                 C(99, 0), C(1, 0)}));
  args.push_back(MakeLiteral<C>(PrimitiveType::C64, {2, 1, 2},
                                {C(1, -1), C(2, 0), C(3, 0), C(4, 0)}));
  Literal out = Eval(Module(R"(  a = c64[2,2,2] parameter(0)
  b = c64[2,1,2] parameter(1)
  ROOT x = c64[2,1,2] triangular-solve(a, b), left_side=false, lower=false, transpose_a=ADJOINT)"),
                     args);
  const std::vector<C> x = Values<C>(out);
  // a^H = [[1-i, 0], [2, -2i]]; x a^H = b: x1 (-2i) = 2 -> x1 = i; x0 (1-i) + 2 x1 = 1-i ->
  // x0 = (1 - 3i) / (1 - i) = 2 - i. Batch 2: a^H = [[1, 0], [0, 1]], x = [3, 4].
  ASSERT_EQ(x.size(), 4u);
  EXPECT_NEAR(x[0].real(), 2, 1e-6);
  EXPECT_NEAR(x[0].imag(), -1, 1e-6);
  EXPECT_NEAR(x[1].real(), 0, 1e-6);
  EXPECT_NEAR(x[1].imag(), 1, 1e-6);
  EXPECT_EQ(x[2], C(3, 0));
  EXPECT_EQ(x[3], C(4, 0));
}

TEST(EvaluatorTriangularSolveTest, RefusesMismatchedShapes) {
  StatusOr<Literal> bad = EvaluateText(Module(R"(  a = f32[3,3] constant({{1,0,0},{0,1,0},{0,0,1}})
  b = f32[2,3] constant({{1,2,3},{4,5,6}})
  ROOT x = f32[2,3] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE)"),
                                       {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("second-last"));
}

}  // namespace
}  // namespace xlens
