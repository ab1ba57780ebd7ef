// oneDNN calls against the reference evaluator: every post-op the rewriter fuses and every
// layout it accepts (plain, transposed lhs, transposed rhs, both, batched; convolutions in 1, 2
// and 3 spatial dimensions with strides, dilation and asymmetric padding, and the two gradient
// convolutions JAX writes for them). Each module is also checked to have run through oneDNN, so
// a case that silently fell back to Eigen fails; what oneDNN cannot take is checked to run
// without it and still agree.
#include "compiler/runtime/onednn_thunks.h"

#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/passes/onednn_rewriter.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/narrow_product.h"
#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"
#include "test_util.h"
#if __has_include(<omp.h>)
#include <omp.h>
#endif

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Compiles `text`, expects `expected_call` in its thunk listing (and `parts`, when given), and
// compares with the evaluator.
void ExpectOneDnnMatchesEvaluator(const std::string& text, const std::string& expected_call,
                                  const std::string& parts = "") {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN " + expected_call));
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr(parts));
  // oneDNN's GELU and the evaluator's libm tanh/erf agree to a few ulps of the sums.
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
}

// Below, with the convolutions' cases.
void ExpectRepeatedCallsMatchEvaluator(const std::string& text, const std::string& expected_call,
                                       const std::vector<std::vector<Literal>>& argument_sets);

std::string DotModule(const std::string& lhs, const std::string& rhs, const std::string& out,
                      const std::string& operands, const std::string& dims,
                      const std::string& epilogue, const std::string& extra_params = "") {
  return "HloModule m\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs +
         " parameter(1)\n" + extra_params + operands + "  d = " + out + " dot(" +
         (operands.find(" ta ") != std::string::npos ? "ta" : "a") + ", " +
         (operands.find(" tb ") != std::string::npos ? "tb" : "b") + "), " + dims + "\n" +
         epilogue + "}\n";
}

// Small products are held to oneDNN here (SmallProductLimit 0) so that its kernels and post-ops
// are what these cases check; SmallProductsRunInTheThunksOwnLoops checks the other path.
class OneDnnThunkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
    saved_limit_ = SmallProductLimit();
    SetSmallProductLimit(0);
  }
  void TearDown() override { SetSmallProductLimit(saved_limit_); }

 private:
  int64_t saved_limit_ = 0;
};

TEST_F(OneDnnThunkTest, MatmulLayoutsReadTransposedOperandsInPlace) {
  const std::string dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
  const std::string root = "  ROOT r = f32[5,7] negate(d)\n";
  // Plain.
  ExpectOneDnnMatchesEvaluator(DotModule("f32[5,9]", "f32[9,7]", "f32[5,7]", "", dims, root),
                               "matmul(lhs, rhs)");
  // lhs stored [k, m], rhs stored [n, k], both.
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[9,5]", "f32[9,7]", "f32[5,7]",
                "  ta = f32[5,9] transpose(a), dimensions={1,0}\n", dims, root),
      "matmul(lhs^T, rhs)");
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[5,9]", "f32[7,9]", "f32[5,7]",
                "  tb = f32[9,7] transpose(b), dimensions={1,0}\n", dims, root),
      "matmul(lhs, rhs^T)");
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[9,5]", "f32[7,9]", "f32[5,7]",
                "  ta = f32[5,9] transpose(a), dimensions={1,0}\n"
                "  tb = f32[9,7] transpose(b), dimensions={1,0}\n",
                dims, root),
      "matmul(lhs^T, rhs^T)");
  // Batched (two batch dimensions, as one call), rhs transposed, as attention's q k^T.
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[2,3,6,4]", "f32[2,3,5,4]", "f32[2,3,6,5]",
                "  tb = f32[2,3,4,5] transpose(b), dimensions={0,1,3,2}\n",
                "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, "
                "rhs_contracting_dims={2}",
                "  ROOT r = f32[2,3,6,5] negate(d)\n"),
      "matmul(lhs, rhs^T)");
  // A dot written in a non-canonical form reaches oneDNN through dot-decomposer's transpose.
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[9,5]", "f32[9,7]", "f32[5,7]", "",
                "lhs_contracting_dims={0}, rhs_contracting_dims={0}", root),
      "matmul(lhs^T, rhs)");
}

// Every post-op the rewriter fuses, on a [6,10]x[10,8] product; `listed` is expected in each
// thunk listing.
void ExpectEveryPostOpMatchesEvaluator(const std::string& listed) {
  const std::string dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
  const std::string out = "f32[6,8]";
  struct Case {
    std::string params, epilogue, call;
  };
  const std::string half = "  h = f32[] constant(0.5)\n  hb = f32[6,8] broadcast(h), dimensions={}\n";
  const std::string one = "  o = f32[] constant(1)\n  ob = f32[6,8] broadcast(o), dimensions={}\n";
  const std::vector<Case> cases = {
      {"  bias = f32[8] parameter(2)\n",
       "  bb = f32[6,8] broadcast(bias), dimensions={1}\n  ROOT r = f32[6,8] add(d, bb)\n",
       "matmul(lhs, rhs) + binary_add[bias]"},
      {"  res = f32[6,8] parameter(2)\n", "  ROOT r = f32[6,8] add(res, d)\n",
       "matmul(lhs, rhs) + binary_add"},
      {"  s = f32[] parameter(2)\n",
       "  sb = f32[6,8] broadcast(s), dimensions={}\n  ROOT r = f32[6,8] add(d, sb)\n",
       "matmul(lhs, rhs) + binary_add[scalar]"},
      {"", "  z = f32[] constant(0)\n  zb = f32[6,8] broadcast(z), dimensions={}\n"
           "  ROOT r = f32[6,8] maximum(d, zb)\n",
       "matmul(lhs, rhs) + relu"},
      // ReLU6 as jax.nn.relu6 writes it and as TensorFlow's clamp(0, x, 6), after a bias.
      {"", "  z = f32[] constant(0)\n  zb = f32[6,8] broadcast(z), dimensions={}\n"
           "  six = f32[] constant(6)\n  sb = f32[6,8] broadcast(six), dimensions={}\n"
           "  m = f32[6,8] maximum(d, zb)\n  ROOT r = f32[6,8] minimum(m, sb)\n",
       "matmul(lhs, rhs) + relu6"},
      {"  bias = f32[8] parameter(2)\n",
       "  bb = f32[6,8] broadcast(bias), dimensions={1}\n  ab = f32[6,8] add(d, bb)\n"
       "  z = f32[] constant(0)\n  six = f32[] constant(6)\n  ROOT r = f32[6,8] clamp(z, ab, six)\n",
       "matmul(lhs, rhs) + binary_add[bias] + relu6"},
      // Two linear maps around an add: oneDNN would apply the first's parameters to both, so the
      // second stays outside the call.
      {"  res = f32[6,8] parameter(2)\n",
       half + "  m = f32[6,8] multiply(d, hb)\n  s = f32[6,8] add(m, res)\n"
              "  c = f32[] constant(3)\n  cb = f32[6,8] broadcast(c), dimensions={}\n"
              "  ROOT r = f32[6,8] multiply(s, cb)\n",
       "matmul(lhs, rhs) + linear(0.5x+0) + binary_add"},
      // Subtractions: res - d as -d + res, d - bias as -(-d + bias).
      {"  res = f32[6,8] parameter(2)\n", "  ROOT r = f32[6,8] subtract(res, d)\n",
       "matmul(lhs, rhs) + linear(-1x+0) + binary_add"},
      {"  bias = f32[8] parameter(2)\n",
       "  bb = f32[6,8] broadcast(bias), dimensions={1}\n  ROOT r = f32[6,8] subtract(d, bb)\n",
       "matmul(lhs, rhs) + linear(-1x+0) + binary_add[bias] + linear(-1x+0)"},
      {"", "  c = f32[] constant(0.125)\n  cb = f32[6,8] broadcast(c), dimensions={}\n"
           "  m = f32[6,8] multiply(d, cb)\n  ROOT r = f32[6,8] subtract(m, ob)\n" + one,
       "matmul(lhs, rhs) + linear(0.125x-1)"},
      // Not composed into linear(1x+0): d + 1e8 rounds to a multiple of 8.
      {"", "  c = f32[] constant(1e8)\n  cb = f32[6,8] broadcast(c), dimensions={}\n"
           "  s = f32[6,8] add(d, cb)\n  ROOT r = f32[6,8] subtract(s, cb)\n",
       "matmul(lhs, rhs) + linear(1x+1e+08)"},
      // tanh GELU as JAX writes it.
      {"", half + one +
               "  k = f32[] constant(0.044715)\n  kb = f32[6,8] broadcast(k), dimensions={}\n"
               "  s = f32[] constant(0.797884583)\n  sb = f32[6,8] broadcast(s), dimensions={}\n"
               "  x2 = f32[6,8] multiply(d, d)\n  x3 = f32[6,8] multiply(x2, d)\n"
               "  a3 = f32[6,8] multiply(x3, kb)\n  in = f32[6,8] add(d, a3)\n"
               "  sc = f32[6,8] multiply(in, sb)\n  t = f32[6,8] tanh(sc)\n"
               "  t1 = f32[6,8] add(t, ob)\n  th = f32[6,8] multiply(t1, hb)\n"
               "  ROOT r = f32[6,8] multiply(d, th)\n",
       "matmul(lhs, rhs) + gelu_tanh"},
  };
  for (const Case& c : cases) {
    ExpectOneDnnMatchesEvaluator(DotModule("f32[6,10]", "f32[10,8]", out, "", dims, c.epilogue, c.params),
                                 c.call, listed);
  }
}

TEST_F(OneDnnThunkTest, EveryPostOpMatchesTheEvaluator) { ExpectEveryPostOpMatchesEvaluator(""); }

// A gradient step as JAX writes it for x @ w: w - transpose(g^T x) * lr is one call computing
// x^T g (both operands read in place) with the scaling and the subtraction as post-ops; large
// enough to be split over the pool.
TEST_F(OneDnnThunkTest, TransposedProductsWithAGradientStep) {
  const std::string text = R"(HloModule m
ENTRY e {
  g = f32[48,64] parameter(0)
  x = f32[48,80] parameter(1)
  w = f32[80,64] parameter(2)
  tg = f32[64,48] transpose(g), dimensions={1,0}
  d = f32[64,80] dot(tg, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.1)
  cb = f32[64,80] broadcast(c), dimensions={}
  m = f32[64,80] multiply(d, cb)
  t = f32[80,64] transpose(m), dimensions={1,0}
  ROOT r = f32[80,64] subtract(w, t)
})";
  ExpectOneDnnMatchesEvaluator(text, "matmul(lhs^T, rhs) + linear(-0.1x-0) + binary_add");
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  // The call is all there is: no transposing loop after it.
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr("\nkernel ")));
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr("transpose")));
}

// maximum(x, 0) keeps a NaN, as XLA's maximum and the evaluator do, where oneDNN's eltwise_relu
// gives 0: the ReLU and what follows it are applied after the call, on every way a call is split
// (blocks of rows with and without a bias, blocks of columns with the bias summed in first, parts
// of images and bands of rows of a convolution). A NaN, an infinity of each sign and -0 in the lhs
// make rows of NaN, of +-inf and of 0 in the product.
TEST_F(OneDnnThunkTest, ReluKeepsANaNAsXlaMaximumDoes) {
  const std::string relu = "  z = f32[] constant(0)\n";
  auto with_specials = [](const std::string& text) {
    std::vector<Literal> arguments = testing::RandomArguments(text, 5);
    auto lhs = arguments[0].data<float>();
    const float specials[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), -0.f};
    for (size_t i = 0; i < 4; ++i) lhs[(i * 7919 + 13) % lhs.size()] = specials[i];
    std::vector<std::vector<Literal>> sets;
    sets.push_back(std::move(arguments));
    return sets;
  };
  const std::string rows = DotModule("f32[64,256]", "f32[256,128]", "f32[64,128]", "",
                                     "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                                     relu + "  zb = f32[64,128] broadcast(z), dimensions={}\n"
                                            "  ROOT r = f32[64,128] maximum(d, zb)\n");
  ExpectRepeatedCallsMatchEvaluator(rows, "matmul(lhs, rhs) + relu;", with_specials(rows));
  // ReLU6 (clamp(0, x, 6)) likewise: a NaN kept, +inf to 6, -inf to 0.
  const std::string relu6 = DotModule("f32[64,256]", "f32[256,128]", "f32[64,128]", "",
                                      "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                                      relu + "  six = f32[] constant(6)\n"
                                             "  ROOT r = f32[64,128] clamp(z, d, six)\n");
  ExpectRepeatedCallsMatchEvaluator(relu6, "matmul(lhs, rhs) + relu6", with_specials(relu6));
  // A bias, the ReLU, then a scaling: the two after the ReLU are the thunk's too.
  const std::string bias = DotModule(
      "f32[64,256]", "f32[256,128]", "f32[64,128]", "", "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      relu + "  bb = f32[64,128] broadcast(c), dimensions={1}\n  s = f32[64,128] add(d, bb)\n"
             "  zb = f32[64,128] broadcast(z), dimensions={}\n  r = f32[64,128] maximum(s, zb)\n"
             "  two = f32[] constant(2)\n  tb = f32[64,128] broadcast(two), dimensions={}\n"
             "  ROOT t = f32[64,128] multiply(tb, r)\n",
      "  c = f32[128] parameter(2)\n");
  ExpectRepeatedCallsMatchEvaluator(bias, "matmul(lhs, rhs) + binary_add[bias] + relu + linear(2x+0)",
                                    with_specials(bias));
  // Wide (n = 16m): blocks of columns, the output's rows longer than a block's.
  const std::string columns = DotModule(
      "f32[32,256]", "f32[256,512]", "f32[32,512]", "", "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      relu + "  bb = f32[32,512] broadcast(c), dimensions={1}\n  s = f32[32,512] add(d, bb)\n"
             "  zb = f32[32,512] broadcast(z), dimensions={}\n  ROOT r = f32[32,512] maximum(s, zb)\n",
      "  c = f32[512] parameter(2)\n");
  ExpectRepeatedCallsMatchEvaluator(columns, "matmul(lhs, rhs) + binary_add[bias] + relu", with_specials(columns));
  for (const char* images : {"4", "1"}) {
    const std::string convolution = fmt::format(R"(HloModule c
ENTRY e {{
  x = f32[{0},16,16,32] parameter(0)
  k = f32[3,3,32,32] parameter(1)
  bias = f32[32] parameter(2)
  c = f32[{0},16,16,32] convolution(x, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  bb = f32[{0},16,16,32] broadcast(bias), dimensions={{3}}
  a = f32[{0},16,16,32] add(c, bb)
  z = f32[] constant(0)
  zb = f32[{0},16,16,32] broadcast(z), dimensions={{}}
  ROOT r = f32[{0},16,16,32] maximum(a, zb)
}})",
                                                images);
    ExpectRepeatedCallsMatchEvaluator(convolution, "convolution + binary_add[bias] + relu",
                                      with_specials(convolution));
  }
}

// Compiles `text`, expects `expected_call` (and `kernel`) in its listing, runs it on `arguments`
// and compares with the evaluator, the sign of every zero included (ExpectLiteralNear takes -0
// for +0); at least one result must be -0, so that the case can tell.
void ExpectZerosSignedAsTheEvaluator(const std::string& text, const std::string& expected_call,
                                     const std::string& kernel, const std::vector<Literal>& arguments) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN " + expected_call));
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr(kernel));
  auto reference = ParseHloModule(text);
  ASSERT_TRUE(reference.ok());
  auto expected = EvaluateModule(**reference, arguments);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto actual = (*exe)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, {2e-5, 2e-5});
  EXPECT_TRUE(match.ok()) << match.message();
  auto want = expected->data<float>();
  auto got = actual->data<float>();
  ASSERT_EQ(want.size(), got.size());
  int64_t negative_zeros = 0, wrong_signs = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    if (want[e] != 0 || got[e] != 0) continue;
    negative_zeros += std::signbit(want[e]);
    if (std::signbit(want[e]) != std::signbit(got[e])) {
      if (++wrong_signs <= 3) ADD_FAILURE() << "element " << e << ": " << got[e] << ", the evaluator " << want[e];
    }
  }
  EXPECT_EQ(wrong_signs, 0);
  EXPECT_GT(negative_zeros, 0);
}

// A bias, a tanh GELU, then a scaling by 3: where the bias sends the GELU's input far left of
// zero its result is -0 (x times a tanh that rounds to -1), and the evaluator's multiply keeps
// it, 3 * -0 = -0. The linear post-op must too: alpha x + (+0) would give +0. On the thunk's own
// loops after oneDNN's product (where the CPU has AVX-512, the GELU is the thunk's: its -0 reaches
// the scaling) and on the small products' loops. (oneDNN 2.6's gelu_erf gives +0 there before
// any scaling, where the evaluator gives -0; where its gelu_tanh runs, the case is left out.)
TEST_F(OneDnnThunkTest, AScalingAfterAGeluKeepsTheSignOfZero) {
  OneDnnPostOp gelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluTanh;
  for (const bool small : {false, true}) {
    SCOPED_TRACE(small ? "small-product loops" : "oneDNN");
    if (!small && !OneDnnPostOpAppliedByThunk(gelu)) continue;  // oneDNN's GELU, not the thunk's
    const int64_t m = small ? 4 : 32, k = small ? 16 : 64, n = small ? 8 : 48;
    SetSmallProductLimit(small ? int64_t{1} << 15 : 0);
    const std::string out = fmt::format("f32[{},{}]", m, n);
    const std::string epilogue = fmt::format(R"(  bb = {0} broadcast(bias), dimensions={{1}}
  x = {0} add(d, bb)
  half = f32[] constant(0.5)
  hb = {0} broadcast(half), dimensions={{}}
  one = f32[] constant(1)
  ob = {0} broadcast(one), dimensions={{}}
  c = f32[] constant(0.044715)
  cb = {0} broadcast(c), dimensions={{}}
  s = f32[] constant(0.797884583)
  sb = {0} broadcast(s), dimensions={{}}
  x2 = {0} multiply(x, x)
  x3 = {0} multiply(x2, x)
  a3 = {0} multiply(x3, cb)
  in = {0} add(x, a3)
  sc = {0} multiply(in, sb)
  t = {0} tanh(sc)
  t1 = {0} add(t, ob)
  th = {0} multiply(t1, hb)
  g = {0} multiply(x, th)
  three = f32[] constant(3)
  tb = {0} broadcast(three), dimensions={{}}
  ROOT r = {0} multiply(g, tb)
)",
                                             out);
    const std::string text = DotModule(fmt::format("f32[{},{}]", m, k), fmt::format("f32[{},{}]", k, n), out, "",
                                       "lhs_contracting_dims={1}, rhs_contracting_dims={0}", epilogue,
                                       fmt::format("  bias = f32[{}] parameter(2)\n", n));
    std::vector<Literal> arguments = testing::RandomArguments(text, 3);
    auto bias = arguments[2].data<float>();
    for (size_t j = 0; j < bias.size(); j += 2) bias[j] = -40.f;  // every other column far left
    ExpectZerosSignedAsTheEvaluator(text, "matmul(lhs, rhs) + binary_add[bias] + gelu_tanh + linear(3x+0)",
                                    small ? "kernel small-product:" : "", arguments);
  }
}

TEST_F(OneDnnThunkTest, StructurallyMatchedFormsAndTheirNearMissesMatchTheEvaluator) {
  const std::string head =
      "HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n  b = f32[2,2] parameter(1)\n"
      "  d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  zero = f32[] constant(0)\n  zb = f32[2,2] broadcast(zero), dimensions={}\n"
      "  one = f32[] constant(1)\n  ob = f32[2,2] broadcast(one), dimensions={}\n";
  // d = a: one value in (9, 11], one above, two at most 0.
  auto matrix = [](std::vector<float> values) {
    Literal l(*ParseShape("f32[2,2]"));
    std::copy(values.begin(), values.end(), l.data<float>().begin());
    return l;
  };
  std::vector<Literal> args;
  args.push_back(matrix({10, 12, -1, -3}));
  args.push_back(matrix({1, 0, 0, 1}));
  // ReLU but 0 on (9, 11]: equal to ReLU on a sampling grid; computed as written, 0 at d = 10.
  const std::string piecewise =
      head +
      "  relu = f32[2,2] maximum(d, zb)\n  nine = f32[] constant(9)\n"
      "  nb = f32[2,2] broadcast(nine), dimensions={}\n  eleven = f32[] constant(11)\n"
      "  eb = f32[2,2] broadcast(eleven), dimensions={}\n"
      "  above9 = pred[2,2] compare(d, nb), direction=GT\n"
      "  above11 = pred[2,2] compare(d, eb), direction=GT\n"
      "  hole = f32[2,2] select(above9, zb, relu)\n"
      "  ROOT r = f32[2,2] select(above11, relu, hole)\n}\n";
  auto module = ParseHloModule(piecewise);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN matmul(lhs, rhs);"));
  Literal out = testing::ExpectMatchesEvaluator(piecewise, std::move(args), {2e-5, 2e-5});
  EXPECT_EQ(out.data<float>()[0], 0.0f);
  EXPECT_EQ(out.data<float>()[1], 12.0f);
  // The logistic function in both spellings, and its near miss (1 + exp(-x)) / 1, of which only
  // the negation is a post-op.
  const std::string denominator =
      "  n = f32[2,2] negate(d)\n  ex = f32[2,2] exponential(n)\n  den = f32[2,2] add(ob, ex)\n";
  ExpectOneDnnMatchesEvaluator(head + "  ROOT r = f32[2,2] logistic(d)\n}\n",
                               "matmul(lhs, rhs) + logistic");
  ExpectOneDnnMatchesEvaluator(head + denominator + "  ROOT r = f32[2,2] divide(ob, den)\n}\n",
                               "matmul(lhs, rhs) + logistic");
  ExpectOneDnnMatchesEvaluator(head + denominator + "  ROOT r = f32[2,2] divide(den, ob)\n}\n",
                               "matmul(lhs, rhs) + linear(-1x+0);");
}

TEST_F(OneDnnThunkTest, JaxErfGeluAfterABias) {
  // jax.nn.gelu(x @ w + b, approximate=False), lowered by JAX (erf as rational approximations).
  std::ifstream in(XLENS_TESTDATA_DIR "/dense_bias_gelu_erf.hlo");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty());
  ExpectOneDnnMatchesEvaluator(text.str(), "matmul(lhs, rhs) + binary_add[bias] + gelu_erf");
}

// The last library call of `exe`, or null.
const OneDnnThunk* LastOneDnnCall(const Executable& exe) {
  const OneDnnThunk* call = nullptr;
  for (const auto& thunk : exe.thunks()) {
    if (const auto* c = dynamic_cast<const OneDnnThunk*>(thunk.get())) call = c;
  }
  return call;
}

// Where the pool has two or more threads: the last library call of `exe` runs in parts on it,
// and its listing says how many (Parts(): 2 on two CPUs; 3 or 4 for these shapes on four).
void ExpectPartsOnThePool(const Executable& exe) {
  if (ThreadPool::Default().parallelism() < 2) return;
  const OneDnnThunk* call = LastOneDnnCall(exe);
  ASSERT_NE(call, nullptr);
  EXPECT_GT(call->Parts(), 1);
  EXPECT_THAT(exe.ThunkSequenceText(), HasSubstr("; " + std::to_string(call->Parts()) + " parts on the pool"));
}

void ExpectPartsOnThePool(const std::string& text) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  ExpectPartsOnThePool(**exe);
}

TEST_F(OneDnnThunkTest, CallsSplitOverThePoolAgreeAtEveryOffset) {
  // Large enough to be split into parts (of at least 2^18 multiply-adds) on a machine with two
  // or more threads: bias, residual and transposed-operand offsets.
  const std::string bias = R"(HloModule m
ENTRY e {
  a = f32[40,512] parameter(0)
  b = f32[72,512] parameter(1)
  bias = f32[72] parameter(2)
  tb = f32[512,72] transpose(b), dimensions={1,0}
  d = f32[40,72] dot(a, tb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[40,72] broadcast(bias), dimensions={1}
  ROOT r = f32[40,72] add(d, bb)
})";
  ExpectOneDnnMatchesEvaluator(bias, "matmul(lhs, rhs^T) + binary_add[bias]");
  ExpectPartsOnThePool(bias);
  // Each block of the transposed lhs is packed into rows again on every call.
  const std::string transposed = R"(HloModule m
ENTRY e {
  a = f32[192,144] parameter(0)
  b = f32[192,40] parameter(1)
  res = f32[144,40] parameter(2)
  ta = f32[144,192] transpose(a), dimensions={1,0}
  d = f32[144,40] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[144,40] add(d, res)
})";
  ExpectOneDnnMatchesEvaluator(transposed, "matmul(lhs^T, rhs) + binary_add");
  ExpectPartsOnThePool(transposed);
  ExpectRepeatedCallsMatchEvaluator(transposed, "matmul(lhs^T, rhs) + binary_add",
                                    {testing::RandomArguments(transposed, 1), testing::RandomArguments(transposed, 2)});
  // The MNIST step's weight gradient, 10x100x784 (784K multiply-adds): two parts of 5 rows of
  // its transposed lhs, each packed.
  const std::string few_rows = R"(HloModule m
ENTRY e {
  g = f32[100,10] parameter(0)
  x = f32[100,784] parameter(1)
  d = f32[10,784] dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[10,784] broadcast(f32[] constant(0.5)), dimensions={}
  ROOT r = f32[10,784] multiply(d, c)
})";
  ExpectOneDnnMatchesEvaluator(few_rows, "matmul(lhs^T, rhs) + linear(0.5x+0)");
  ExpectPartsOnThePool(few_rows);
  // Where the pool would run the parts on the caller alone (here: from inside one of its
  // chunks), the product runs whole, as one more part: one whole run, and the same numbers.
  {
    auto module = ParseHloModule(few_rows);
    ASSERT_TRUE(module.ok());
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok());
    const OneDnnThunk* call = LastOneDnnCall(**exe);
    ASSERT_NE(call, nullptr);
    auto reference = ParseHloModule(few_rows);
    ASSERT_TRUE(reference.ok());
    const std::vector<Literal> arguments = testing::RandomArguments(few_rows, 3);
    auto expected = EvaluateModule(**reference, arguments);
    ASSERT_TRUE(expected.ok());
    ThreadPool::Default().ParallelFor(2, 1, [&](int64_t begin, int64_t) {
      if (begin != 0) return;
      auto actual = (*exe)->Execute(arguments);
      ASSERT_TRUE(actual.ok()) << actual.status().message();
      Status match = ExpectLiteralNear(*expected, *actual, {2e-5, 2e-5});
      EXPECT_TRUE(match.ok()) << match.message();
    });
    EXPECT_EQ(call->WholeRuns(), call->Parts() > 1 ? 1 : 0);
  }
  // 2^18 multiply-adds: not worth waking a thread for.
  ExpectOneDnnMatchesEvaluator(R"(HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                               "matmul(lhs, rhs)", "; 1 part on the pool");
  // Batch parts of a product that small run one after the other on the calling thread.
  ExpectOneDnnMatchesEvaluator(R"(HloModule m
ENTRY e {
  a = f32[4,32,32] parameter(0)
  b = f32[4,32,32] parameter(1)
  ROOT d = f32[4,32,32] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})",
                               "matmul(lhs, rhs)", "; 4 parts on the calling thread");
}

std::string KernelOf(const std::string& text);

TEST_F(OneDnnThunkTest, NarrowOutputRowsRunInTheirOwnLoops) {
  // Output rows of at most 12 columns (a classifier's logits) run in NarrowProduct's loops
  // where the CPU has them, in the same parts of rows: a bias, and a full addend read at each
  // part's rows; a transposed rhs is read as it lies.
  // Without AVX-512 oneDNN's kernel runs them (gemm:jit there, not brgemm).
  auto expect_narrow_kernel = [](const std::string& text) {
    if (NarrowProductAvailable()) {
      EXPECT_THAT(KernelOf(text), StartsWith("narrow-product:avx512"));
    } else {
      EXPECT_THAT(KernelOf(text), Not(HasSubstr("narrow-product")));
    }
  };
  const std::string logits = R"(HloModule m
ENTRY e {
  x = f32[100,784] parameter(0)
  w = f32[784,10] parameter(1)
  b = f32[10] parameter(2)
  r = f32[100,10] parameter(3)
  d = f32[100,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[100,10] broadcast(b), dimensions={1}
  s = f32[100,10] add(d, bb)
  ROOT o = f32[100,10] add(s, r)
})";
  ExpectOneDnnMatchesEvaluator(logits, "matmul(lhs, rhs) + binary_add[bias] + binary_add");
  ExpectPartsOnThePool(logits);
  expect_narrow_kernel(logits);
  const std::string transposed = R"(HloModule m
ENTRY e {
  x = f32[64,200] parameter(0)
  w = f32[7,200] parameter(1)
  ROOT d = f32[64,7] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
})";
  ExpectOneDnnMatchesEvaluator(transposed, "matmul(lhs, rhs^T)");
  expect_narrow_kernel(transposed);
  // A weight gradient x^T g: the lhs read transposed in place (each part its columns), the rhs
  // stored [k, n].
  const std::string gradient = R"(HloModule m
ENTRY e {
  x = f32[100,600] parameter(0)
  g = f32[100,10] parameter(1)
  ROOT d = f32[600,10] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})";
  ExpectOneDnnMatchesEvaluator(gradient, "matmul(lhs^T, rhs)");
  ExpectPartsOnThePool(gradient);
  expect_narrow_kernel(gradient);
  // With the weight update w - 0.05 x^T g, which the loops apply as they store each row.
  const std::string update = R"(HloModule m
ENTRY e {
  x = f32[100,600] parameter(0)
  g = f32[100,10] parameter(1)
  w = f32[600,10] parameter(2)
  d = f32[600,10] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[] constant(0.05)
  cb = f32[600,10] broadcast(c), dimensions={}
  m = f32[600,10] multiply(d, cb)
  ROOT u = f32[600,10] subtract(w, m)
})";
  ExpectOneDnnMatchesEvaluator(update, "matmul(lhs^T, rhs) + linear(-0.05x-0) + binary_add");
  ExpectPartsOnThePool(update);
  expect_narrow_kernel(update);
  // The same from a k of kNarrowTransposedLhsMinK (16), the loops' shortest; at 15, oneDNN's.
  for (int64_t k : {kNarrowTransposedLhsMinK - 1, kNarrowTransposedLhsMinK}) {
    const std::string b = std::to_string(k);
    const std::string short_batch = "HloModule m\nENTRY e {\n  x = f32[" + b + ",3136] parameter(0)\n  g = f32[" + b +
                                    ",10] parameter(1)\n  ROOT d = f32[3136,10] dot(x, g), lhs_contracting_dims={0}, "
                                    "rhs_contracting_dims={0}\n}\n";
    SCOPED_TRACE(short_batch);
    ExpectOneDnnMatchesEvaluator(short_batch, "matmul(lhs^T, rhs)");
    if (k >= kNarrowTransposedLhsMinK) {
      expect_narrow_kernel(short_batch);
    } else {
      EXPECT_THAT(KernelOf(short_batch), Not(HasSubstr("narrow-product")));
    }
  }
  // A short k into wide rows, the rhs read transposed (the gradient through a classifier,
  // g w^T): ShortKProduct's loops, in parts of columns.
  const std::string short_k = R"(HloModule m
ENTRY e {
  g = f32[32,10] parameter(0)
  w = f32[3136,10] parameter(1)
  ROOT d = f32[32,3136] dot(g, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
})";
  ExpectOneDnnMatchesEvaluator(short_k, "matmul(lhs, rhs^T)");
  ExpectPartsOnThePool(short_k);
  if (NarrowProductAvailable()) {
    EXPECT_EQ(KernelOf(short_k), "short-k-product:avx512");
  } else {
    EXPECT_THAT(KernelOf(short_k), Not(HasSubstr("short-k")));
  }
  // The MLP step's 128x256x10 products (327,680 multiply-adds: one oneDNN part) go to the
  // loops in two parts from 2^17 multiply-adds: the logits x w + b, the weight gradient x^T g
  // and the gradient g w^T back through the classifier.
  const std::string mlp_products[] = {R"(HloModule m
ENTRY e {
  x = f32[128,256] parameter(0)
  w = f32[256,10] parameter(1)
  b = f32[10] parameter(2)
  d = f32[128,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[128,10] broadcast(b), dimensions={1}
  ROOT s = f32[128,10] add(d, bb)
})",
                                      R"(HloModule m
ENTRY e {
  x = f32[128,256] parameter(0)
  g = f32[128,10] parameter(1)
  ROOT d = f32[256,10] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})",
                                      R"(HloModule m
ENTRY e {
  g = f32[128,10] parameter(0)
  w = f32[256,10] parameter(1)
  ROOT d = f32[128,256] dot(g, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
})"};
  for (const std::string& text : mlp_products) {
    SCOPED_TRACE(text);
    if (!NarrowProductAvailable()) continue;
    EXPECT_THAT(KernelOf(text), HasSubstr("-product:avx512"));
    ExpectPartsOnThePool(text);
    ExpectOneDnnMatchesEvaluator(text, "matmul(");
  }
  // Few rows and a long k, which oneDNN's parts split in columns: the loops split it in as many
  // parts of k, each packing its own rows of the rhs, and add the partial sums.
  const std::string long_k = R"(HloModule m
ENTRY e {
  x = f32[8,50000] parameter(0)
  w = f32[50000,12] parameter(1)
  ROOT d = f32[8,12] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  expect_narrow_kernel(long_k);
  const bool split = NarrowProductAvailable() && ThreadPool::Default().parallelism() > 1;
  if (split) EXPECT_EQ(KernelOf(long_k), "narrow-product:avx512, split in k");
  // The logits above are split in k too (50 rows a part, k 784): the bias and the full addend
  // apply once, to the sum. An odd k leaves the last part shorter and not in whole vectors.
  if (split) EXPECT_EQ(KernelOf(logits), "narrow-product:avx512, split in k");
  const std::string odd_k = R"(HloModule m
ENTRY e {
  x = f32[32,1001] parameter(0)
  w = f32[1001,10] parameter(1)
  b = f32[10] parameter(2)
  d = f32[32,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[32,10] broadcast(b), dimensions={1}
  ROOT s = f32[32,10] add(d, bb)
})";
  ExpectOneDnnMatchesEvaluator(odd_k, "matmul(lhs, rhs) + binary_add[bias]");
  ExpectPartsOnThePool(odd_k);
  if (split) EXPECT_EQ(KernelOf(odd_k), "narrow-product:avx512, split in k");
  auto module = ParseHloModule(long_k);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  ExpectPartsOnThePool(**exe);
  // Sums of 50000 products: the loops' order of them and the evaluator's differ by 1e-4.
  testing::ExpectMatchesEvaluator(long_k, {}, {1e-3, 1e-3});
  // The parts listed are the parts run: called from inside a chunk of the pool's, which runs
  // them on the caller, the loops count one whole run where they have more than one part.
  // oneDNN's column parts (without AVX-512) run there one after another, and count none.
  const OneDnnThunk* call = LastOneDnnCall(**exe);
  ASSERT_NE(call, nullptr);
  const std::vector<Literal> arguments = testing::RandomArguments(long_k, 1);
  ThreadPool::Default().ParallelFor(2, 1, [&](int64_t begin, int64_t) {
    if (begin == 0) {
      EXPECT_TRUE((*exe)->Execute(arguments).ok());
    }
  });
  EXPECT_EQ(call->WholeRuns(), NarrowProductAvailable() && call->Parts() > 1 ? 1 : 0);
}

// Whether oneDNN's brgemm kernels run here: its f32 ones need AVX-512.
bool HasAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// The oneDNN kernel the first library call of `text` runs on ("brg:avx512_core", "gemm:jit").
std::string KernelOf(const std::string& text) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  if (!exe.ok()) return exe.status().message();
  const std::string listing = (*exe)->ThunkSequenceText();
  const size_t at = listing.find("; kernel ");
  if (at == std::string::npos) return "no oneDNN call in " + listing;
  return listing.substr(at + 9, listing.find(';', at + 9) - at - 9);
}

TEST_F(OneDnnThunkTest, ATanhGeluOnColumnPartsIsAppliedToEachPartsBlock) {
  // jax.nn.gelu(x @ w + b, approximate=True) on a product split in columns (a block of 515
  // columns a part: 32 vectors and a masked tail in each row); the bias summed into the columns
  // first. On a CPU with AVX-512 the thunk applies the GELU to each part's block itself.
  const std::string text = R"(HloModule m
ENTRY e {
  a = f32[32,256] parameter(0)
  b = f32[256,1030] parameter(1)
  bias = f32[1030] parameter(2)
  d = f32[32,1030] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[32,1030] broadcast(bias), dimensions={1}
  x = f32[32,1030] add(d, bb)
  half = f32[] constant(0.5)
  hb = f32[32,1030] broadcast(half), dimensions={}
  one = f32[] constant(1)
  ob = f32[32,1030] broadcast(one), dimensions={}
  k = f32[] constant(0.044715)
  kb = f32[32,1030] broadcast(k), dimensions={}
  s = f32[] constant(0.797884583)
  sb = f32[32,1030] broadcast(s), dimensions={}
  x2 = f32[32,1030] multiply(x, x)
  x3 = f32[32,1030] multiply(x2, x)
  a3 = f32[32,1030] multiply(x3, kb)
  in = f32[32,1030] add(x, a3)
  sc = f32[32,1030] multiply(in, sb)
  t = f32[32,1030] tanh(sc)
  t1 = f32[32,1030] add(t, ob)
  th = f32[32,1030] multiply(t1, hb)
  ROOT r = f32[32,1030] multiply(x, th)
})";
  const bool parallel = ThreadPool::Default().parallelism() >= 2;
  if (parallel) {
    EXPECT_THAT(KernelOf(text), HasSubstr("gemm"));
  }
  ExpectOneDnnMatchesEvaluator(text, "matmul(lhs, rhs) + binary_add[bias] + gelu_tanh",
                               parallel ? "; 2 parts on the pool" : "");
}

TEST_F(OneDnnThunkTest, WideProductsSplitInColumnsShareTheirWeights) {
  // An LSTM-like product, its weights sixteen times its lhs: split in columns over the pool, each
  // part reads its share of the weights (on gemm:jit: brgemm refuses a block of columns) and
  // writes its columns, scaled, at its offset.
  const std::string wide = R"(HloModule m
ENTRY e {
  a = f32[32,256] parameter(0)
  b = f32[256,512] parameter(1)
  d = f32[32,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.5)
  cb = f32[32,512] broadcast(c), dimensions={}
  ROOT r = f32[32,512] multiply(d, cb)
})";
  // With a bias and a residual, which gemm:jit cannot take as post-ops: each part writes their
  // sum into its columns of the output, and the product is added onto it (oneDNN's sum).
  const std::string with_addends = R"(HloModule m
ENTRY e {
  a = f32[32,256] parameter(0)
  b = f32[256,512] parameter(1)
  bias = f32[512] parameter(2)
  res = f32[32,512] parameter(3)
  d = f32[32,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[32,512] broadcast(bias), dimensions={1}
  s = f32[32,512] add(d, bb)
  ROOT r = f32[32,512] add(s, res)
})";
  // A scalar first (it fills the columns) and a bias after it (added to them).
  const std::string with_scalar = R"(HloModule m
ENTRY e {
  a = f32[32,256] parameter(0)
  b = f32[256,512] parameter(1)
  s = f32[] parameter(2)
  bias = f32[512] parameter(3)
  d = f32[32,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  sb = f32[32,512] broadcast(s), dimensions={}
  t = f32[32,512] add(d, sb)
  bb = f32[32,512] broadcast(bias), dimensions={1}
  ROOT r = f32[32,512] add(t, bb)
})";
  // The first two summed into each row in one pass and the third added, in parts of 260 columns
  // (runs of 16 and a remainder of 4).
  const std::string three_addends = R"(HloModule m
ENTRY e {
  a = f32[32,256] parameter(0)
  b = f32[256,520] parameter(1)
  res = f32[32,520] parameter(2)
  bias = f32[520] parameter(3)
  other = f32[32,520] parameter(4)
  d = f32[32,520] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[32,520] add(d, res)
  bb = f32[32,520] broadcast(bias), dimensions={1}
  t = f32[32,520] add(s, bb)
  ROOT r = f32[32,520] add(t, other)
})";
  const bool parallel = ThreadPool::Default().parallelism() >= 2;
  const std::string parts = parallel ? "; 2 parts on the pool" : "";
  if (parallel) {
    EXPECT_THAT(KernelOf(wide), HasSubstr("gemm"));
    EXPECT_THAT(KernelOf(with_addends), HasSubstr("gemm"));
    EXPECT_THAT(KernelOf(with_scalar), HasSubstr("gemm"));
    EXPECT_THAT(KernelOf(three_addends), HasSubstr("gemm"));
  }
  ExpectOneDnnMatchesEvaluator(wide, "matmul(lhs, rhs) + linear(0.5x+0)", parts);
  ExpectOneDnnMatchesEvaluator(with_addends, "matmul(lhs, rhs) + binary_add[bias] + binary_add", parts);
  ExpectOneDnnMatchesEvaluator(with_scalar, "matmul(lhs, rhs) + binary_add[scalar] + binary_add[bias]", parts);
  ExpectOneDnnMatchesEvaluator(three_addends, "matmul(lhs, rhs) + binary_add + binary_add[bias] + binary_add", parts);
  // Weights of 2 MiB (the GELU MLP's second product has 4) are split in columns too, however
  // tall the product; half of them stay in rows on brgemm.
  auto product = [](int64_t k) {
    const std::string ks = std::to_string(k);
    return "HloModule m\nENTRY e {\n  a = f32[192," + ks + "] parameter(0)\n  b = f32[" + ks +
           ",512] parameter(1)\n  ROOT d = f32[192,512] dot(a, b), lhs_contracting_dims={1}, "
           "rhs_contracting_dims={0}\n}\n";
  };
  if (parallel) {
    EXPECT_THAT(KernelOf(product(1024)), HasSubstr("gemm"));
    // Without AVX-512 oneDNN runs every f32 product on gemm:jit.
    if (HasAvx512()) {
      EXPECT_THAT(KernelOf(product(512)), HasSubstr("brg"));
    }
  }
}

// The weights that gemm:jit reads in blocks of columns, rows a multiple of 4 KiB apart, in a
// product of at most 64 rows, are named for the executable to keep on 4 KiB pages
// (cpu_compiler.cc); weights read whole, with rows at another stride or by more rows are not.
TEST_F(OneDnnThunkTest, ColumnBlocksOfWeightsWithRowsAPageApartAreNamed) {
  auto weights_slot = [](int64_t m, int64_t k, int64_t n) -> std::optional<int64_t> {
    const std::string ms = std::to_string(m);
    const std::string text = "HloModule m\nENTRY e {\n  a = f32[" + ms + "," + std::to_string(k) +
                             "] parameter(0)\n  b = f32[" + std::to_string(k) + "," + std::to_string(n) +
                             "] parameter(1)\n  ROOT d = f32[" + ms + "," + std::to_string(n) +
                             "] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    auto module = ParseHloModule(text);
    if (!module.ok()) return std::nullopt;
    auto exe = CompileForCpu(std::move(*module), {});
    if (!exe.ok()) return std::nullopt;
    for (const auto& thunk : (*exe)->thunks()) {
      if (const auto* call = dynamic_cast<const OneDnnThunk*>(thunk.get())) return call->ColumnBlockWeightsSlot();
    }
    return std::nullopt;
  };
  if (ThreadPool::Default().parallelism() < 2) GTEST_SKIP() << "one thread: no parts";
  // The LSTM step's h x wh: 4 MiB of weights, rows of 8 KiB, split in columns.
  std::optional<int64_t> lstm = weights_slot(64, 512, 2048);
  ASSERT_TRUE(lstm.has_value());
  EXPECT_GE(*lstm, 0);
  // Rows of 8000 bytes: split in columns all the same, but their rows spread over the sets.
  EXPECT_EQ(weights_slot(64, 512, 2000), std::optional<int64_t>(-1));
  // Rows of 4 KiB in a product split in rows (1 MiB of weights, n < 4m): read whole.
  EXPECT_EQ(weights_slot(512, 256, 1024), std::optional<int64_t>(-1));
  // The GELU MLP's first product: in columns, rows of 8 KiB, but 256 rows share each block.
  EXPECT_EQ(weights_slot(256, 512, 2048), std::optional<int64_t>(-1));
}

// The huge pages (AnonHugePages, kB) of every mapping of this process that asks for small pages
// (VmFlags "nh", MADV_NOHUGEPAGE), by its size in kB; empty where smaps does not say.
std::vector<std::pair<int64_t, int64_t>> SmallPageMappings() {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<std::pair<int64_t, int64_t>> mappings;
  int64_t size = 0, huge = 0;
  std::string line;
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "Size:") fields >> size;
    if (key == "AnonHugePages:") fields >> huge;
    if (key == "VmFlags:") {
      for (std::string flag; fields >> flag;) {
        if (flag == "nh") mappings.push_back({size, huge});
      }
    }
  }
  return mappings;
}

// Constant weights that gemm:jit reads in blocks of columns are kept on 4 KiB pages as computed
// ones are: the advice comes before the executable writes the constant (on the 2 MiB page it was
// first written on, a range stays, advice or not). Observed in /proc/self/smaps: the weights'
// 6 MiB range is a mapping of its own marked "nh", with no huge page in it (where the constant was
// written first, the whole 2 MiB pages inside it were huge ones). Skipped where transparent huge
// pages are off, since then nothing tells the two orders apart.
TEST_F(OneDnnThunkTest, ConstantColumnBlockWeightsAreKeptOnSmallPagesFromTheirFirstWrite) {
  if (ThreadPool::Default().parallelism() < 2) GTEST_SKIP() << "one thread: no parts";
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  if (mode.find("[never]") != std::string::npos || mode.empty()) GTEST_SKIP() << "no transparent huge pages here";
  // The LSTM step's h x wh with 768 rows of weights (6 MiB, rows of 8 KiB), the weights a constant.
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  a = f32[64,768] parameter(0)
  b = f32[768,2048] parameter(1)
  ROOT d = f32[64,2048] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_TRUE(module.ok());
  HloInstruction* dot = (*module)->entry_computation()->root_instruction();
  Literal weights(*ParseShape("f32[768,2048]"));
  auto values = weights.data<float>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3;
  dot->ReplaceOperandWith(1, (*module)->entry_computation()->AddInstruction(HloInstruction::CreateConstant(std::move(weights))));
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  const OneDnnThunk* call = LastOneDnnCall(**exe);
  ASSERT_NE(call, nullptr);
  ASSERT_GE(call->ColumnBlockWeightsSlot(), 0) << (*exe)->ThunkSequenceText();
  int64_t weights_mappings = 0;
  for (const auto& [size_kb, huge_kb] : SmallPageMappings()) {
    weights_mappings += size_kb >= 6 * 1024;
    EXPECT_EQ(huge_kb, 0) << "a mapping of " << size_kb << " kB kept on small pages holds huge pages";
  }
  EXPECT_GE(weights_mappings, 1) << "no mapping of the weights' size asks for small pages";
}

void ExpectEachPartTraced(const std::string& text) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  const OneDnnThunk* call = LastOneDnnCall(**exe);
  ASSERT_NE(call, nullptr);
  const std::vector<Literal> arguments = testing::RandomArguments(text, 1);
  ASSERT_TRUE(profiler::TracerSession::Start());
  // A run the pool's history keeps on the caller (late workers on a busy machine) is the product
  // whole, one call numbered after the parts: runs go on until two were split, each part has a
  // span in every split run, and the whole call one in each of the others. The pool keeps a loop
  // inline for up to 100 ms at a time (kProbeAtMost), so the runs go on for up to a second, not
  // for a count that a few milliseconds of runs would reach inside one such window.
  int64_t runs = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (runs - call->WholeRuns() < 2 && std::chrono::steady_clock::now() < give_up) {
    ASSERT_TRUE((*exe)->Execute(arguments).ok());
    ++runs;
  }
  const profiler::Trace trace = profiler::TracerSession::Stop();
  const int64_t split_runs = runs - call->WholeRuns();
  ASSERT_GE(split_runs, 2) << "the pool kept the product whole in " << call->WholeRuns() << " of " << runs << " runs";
  std::map<int64_t, int> runs_of_part;
  for (const profiler::TraceEvent& event : trace.events) {
    if (event.category != profiler::category::kLibraryPart) continue;
    EXPECT_FALSE(profiler::IsKernelCategory(event.category));
    const profiler::TraceArg* part = profiler::FindArg(event, "part");
    ASSERT_NE(part, nullptr);
    const int64_t t = std::get<int64_t>(part->value);
    EXPECT_EQ(event.name, call->hlo_name() + " part " + std::to_string(t));
    ++runs_of_part[t];
  }
  EXPECT_EQ(runs_of_part[call->Parts()], call->WholeRuns());
  runs_of_part.erase(call->Parts());
  ASSERT_EQ(static_cast<int64_t>(runs_of_part.size()), call->Parts());
  for (const auto& [t, spans] : runs_of_part) EXPECT_EQ(spans, split_runs) << "part " << t;
}

TEST_F(OneDnnThunkTest, TracedCallsShowEachPartOnTheThreadThatRanIt) {
  // A product in parts, traced: one span per part and call ("<call> part <i>", its number in
  // "part"), beside the call's own span and not a kernel of its own.
  ExpectEachPartTraced(R"(HloModule m
ENTRY e {
  a = f32[40,512] parameter(0)
  b = f32[512,72] parameter(1)
  ROOT d = f32[40,72] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  // The same for the narrow and short-k loops' parts (the MNIST step's logits and the gradient
  // back through a classifier), where the CPU has them: a part's start on a worker against the
  // call's shows what the pool's handoff costs a small product.
  ExpectEachPartTraced(R"(HloModule m
ENTRY e {
  x = f32[100,784] parameter(0)
  w = f32[784,10] parameter(1)
  ROOT d = f32[100,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ExpectEachPartTraced(R"(HloModule m
ENTRY e {
  g = f32[32,10] parameter(0)
  w = f32[3136,10] parameter(1)
  ROOT d = f32[32,3136] dot(g, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
})");
}

TEST_F(OneDnnThunkTest, LongContractionsSplitInKAddTheirPartialProducts) {
  // A contraction eight times as long as the output's rows (the GELU MLP's second product's is
  // four times) over 2 MiB of weights: split in k over the pool, the first part writing the
  // output and the second a partial product that is added to it. An odd k leaves the second
  // part one shorter (its own primitive). A post-op applies to the sum, so a scaled product
  // stays in columns.
  auto product = [](const std::string& epilogue) {
    return "HloModule m\nENTRY e {\n  a = f32[32,2049] parameter(0)\n  b = f32[2049,256] parameter(1)\n"
           "  d = f32[32,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n" +
           epilogue + "}\n";
  };
  const std::string plain = product("  ROOT r = f32[32,256] copy(d)\n");
  const std::string scaled = product(
      "  c = f32[] constant(0.5)\n  cb = f32[32,256] broadcast(c), dimensions={}\n"
      "  ROOT r = f32[32,256] multiply(d, cb)\n");
  if (ThreadPool::Default().parallelism() >= 2) {
    EXPECT_THAT(KernelOf(plain), HasSubstr("split in k"));
    EXPECT_THAT(KernelOf(scaled), Not(HasSubstr("split in k")));
  }
  // Sums of 2049 products, in another order than the evaluator's (in columns too).
  testing::ExpectMatchesEvaluator(plain, {}, {1e-4, 1e-4});
  testing::ExpectMatchesEvaluator(scaled, {}, {1e-4, 1e-4});
}

TEST_F(OneDnnThunkTest, AForwardProductWhoseLhsAGradientReadsTransposedSplitsInKWithItsPostOpsOnTheSum) {
  // A training step's forward x.w + b with its ReLU, and the weight gradient x^T g that reads x
  // transposed: the forward is split in k (each part reading the columns of x the gradient's
  // part on its thread reads next), the bias and the ReLU applied to the sum by the loop that
  // adds the partial products. The same product without the gradient stays in rows.
  auto step = [](const std::string& addend, bool gradient) {
    return "HloModule m\nENTRY e {\n  a = f32[32,2048] parameter(0)\n  b = f32[2048,64] parameter(1)\n"
           "  g = f32[32,64] parameter(2)\n" + addend +
           "  d = f32[32,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  s = f32[32,64] add(d, cb)\n"
           "  z = f32[] constant(0)\n  zb = f32[32,64] broadcast(z), dimensions={}\n"
           "  r = f32[32,64] maximum(s, zb)\n" +
           (gradient ? "  gw = f32[2048,64] dot(a, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
                       "  ROOT t = (f32[32,64], f32[2048,64]) tuple(r, gw)\n}\n"
                     : "  ROOT t = (f32[32,64], f32[32,64]) tuple(r, g)\n}\n");
  };
  const std::string bias = step("  c = f32[64] parameter(3)\n  cb = f32[32,64] broadcast(c), dimensions={1}\n", true);
  // An addend of the output's shape may share its buffer: left in rows.
  const std::string full = step("  cb = f32[32,64] parameter(3)\n", true);
  const std::string alone = step("  c = f32[64] parameter(3)\n  cb = f32[32,64] broadcast(c), dimensions={1}\n", false);
  if (ThreadPool::Default().parallelism() >= 2) {
    auto listing = [](const std::string& text) {
      auto listed = testing::ThunkListing(text);
      EXPECT_TRUE(listed.ok()) << listed.status().message();
      return listed.ok() ? *listed : std::string();
    };
    // The forward's call is the one split (the gradient's reads its lhs transposed).
    const std::string listed = listing(bias);
    const size_t split = listed.find("split in k");
    ASSERT_NE(split, std::string::npos) << listed;
    const size_t line = listed.rfind('\n', split) + 1;
    EXPECT_THAT(listed.substr(line, split - line), HasSubstr("matmul(lhs, rhs) + binary_add[bias] + relu")) << listed;
    EXPECT_EQ(listed.find("split in k", split + 1), std::string::npos) << listed;
    EXPECT_THAT(listing(full), Not(HasSubstr("split in k")));
    EXPECT_THAT(listing(alone), Not(HasSubstr("split in k")));
  }
  // The bias about the product's spread (sums of 2048 products of two values in [-1, 1]: a
  // standard deviation of about 15), so that leaving it out or adding it twice shows; a ReLU
  // applied to a part's partial product instead of the sum would be far off too.
  std::vector<Literal> args = testing::RandomArguments(bias);
  for (float& v : args[3].data<float>()) v *= 40;
  testing::ExpectMatchesEvaluator(bias, std::move(args), {1e-4, 1e-4});
  testing::ExpectMatchesEvaluator(full, {}, {1e-4, 1e-4});
}

// The CPU time of the process's threads other than the calling one (the pool's workers, and an
// OpenMP team's threads were one opened), in milliseconds.
double OtherThreadsCpuMs() {
  timespec process{}, own{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &process);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &own);
  return static_cast<double>(process.tv_sec - own.tv_sec) * 1e3 + static_cast<double>(process.tv_nsec - own.tv_nsec) * 1e-6;
}

// The process's threads, as /proc lists them.
int ThreadsOfProcess() {
  std::error_code error;
  int threads = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end; !error && it != end; it.increment(error)) {
    ++threads;
  }
  return threads;
}

// A product [64,256] x [256,n] beside a 3x3 convolution of 16 channels, compiled for the CPU:
// both run as oneDNN calls, and the convolution's weights are compared with oneDNN's layout at
// build, on the compiling thread.
std::unique_ptr<Executable> ProductBesideConvolution(int64_t n, std::string* text) {
  *text = fmt::format(R"(HloModule m
ENTRY e {{
  a = f32[64,256] parameter(0)
  b = f32[256,{0}] parameter(1)
  x = f32[2,8,8,16] parameter(2)
  k = f32[3,3,16,16] parameter(3)
  d = f32[64,{0}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  c = f32[2,8,8,16] convolution(x, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  ROOT t = (f32[64,{0}], f32[2,8,8,16]) tuple(d, c)
}})",
                      n);
  auto parsed = ParseHloModule(*text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  if (!parsed.ok()) return nullptr;
  auto exe = CompileForCpu(std::move(*parsed), {});
  EXPECT_TRUE(exe.ok()) << exe.status().message();
  if (!exe.ok()) return nullptr;
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN matmul"));
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN convolution"));
  return std::move(*exe);
}

TEST_F(OneDnnThunkTest, AnIdleProcessSpendsNoCpuAfterItsProducts) {
  // oneDNN runs on OpenMP here, whose idle threads may spin after each parallel region (with
  // OMP_WAIT_POLICY=active, until the process ends). Every call, on whichever thread, runs with
  // that thread's OpenMP count at one (SingleOpenMpThread), so OpenMP never opens a team of its
  // own, and the pool's workers sleep within 200 us of their last loop: a process that waits
  // between calls spends nothing.
  std::string text;
  std::unique_ptr<Executable> exe = ProductBesideConvolution(1024, &text);
  ASSERT_NE(exe, nullptr);
  const std::vector<Literal> arguments = testing::RandomArguments(text, 1);
  // Three runs, each followed by 30 ms idle, of which each of the pool's workers spins at most
  // 0.2 ms, and 0.1 ms for it to fall asleep (0.05 ms more for the clocks' reads). The calling
  // thread's own time is left out: on a virtual machine, a thread waking from a sleep is at
  // times charged for milliseconds the host took (2-8 ms a wake-up, in 5 of 100 processes beside
  // another test's, on a 2-CPU VM whose host took 1-3 ticks of those windows), which says
  // nothing of the pool or of OpenMP.
  const int workers = ThreadPool::Default().parallelism() - 1;
  double idle_ms = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(exe->Execute(arguments).ok());
    const double before = OtherThreadsCpuMs();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    idle_ms += OtherThreadsCpuMs() - before;
  }
  EXPECT_LT(idle_ms, 0.05 + 3 * 0.3 * workers);
  // No OpenMP team was opened: its threads outlive the call. The bound above need not catch one
  // (made to open teams, by leaving SingleOpenMpThread out, this test's process had two more
  // threads on a 2-CPU machine, and they spent under 0.01 ms in each window). The process's
  // threads are this one and the pool's workers.
  EXPECT_EQ(ThreadsOfProcess(), 1 + workers);
}

TEST_F(OneDnnThunkTest, ACallerKeepsItsOpenMpThreadCount) {
  // Each oneDNN call holds its thread to one OpenMP thread (SingleOpenMpThread) and puts back
  // the count it found: a host program that set its own count finds it after a run, compiled
  // and executed on its thread.
#if __has_include(<omp.h>)
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  std::string text;
  std::unique_ptr<Executable> exe = ProductBesideConvolution(128, &text);
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(omp_get_max_threads(), 3);
  ASSERT_TRUE(exe->Execute(testing::RandomArguments(text, 1)).ok());
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(saved);
#endif
}

TEST_F(OneDnnThunkTest, TransposedOperandsRunOnThePlainProductsKernel) {
  // The weight gradient of a dense layer (x^T dy): split into row blocks over the pool, the
  // transposed lhs is packed per block so that it runs on the kernel a plain product gets, not
  // on a slower fallback. A small product with few rows stays whole for the same reason.
  const std::string plain = R"(HloModule m
ENTRY e {
  a = f32[256,96] parameter(0)
  b = f32[96,200] parameter(1)
  ROOT d = f32[256,200] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  const std::string transposed = R"(HloModule m
ENTRY e {
  a = f32[96,256] parameter(0)
  b = f32[96,200] parameter(1)
  ta = f32[256,96] transpose(a), dimensions={1,0}
  d = f32[256,200] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.1)
  cb = f32[256,200] broadcast(c), dimensions={}
  ROOT r = f32[256,200] multiply(d, cb)
})";
  const std::string few_rows = R"(HloModule m
ENTRY e {
  a = f32[96,10] parameter(0)
  b = f32[96,200] parameter(1)
  ta = f32[10,96] transpose(a), dimensions={1,0}
  ROOT d = f32[10,200] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})";
  const std::string kernel = KernelOf(plain);
  EXPECT_EQ(KernelOf(transposed), kernel);
  EXPECT_EQ(KernelOf(few_rows), kernel);
  const std::string parts = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "";
  ExpectOneDnnMatchesEvaluator(transposed, "matmul(lhs^T, rhs) + linear(0.1x+0)", parts);
  ExpectOneDnnMatchesEvaluator(few_rows, "matmul(lhs^T, rhs)", "; kernel " + kernel + "; 1 part on");
}

TEST_F(OneDnnThunkTest, ConvolutionsWithBiasAndActivation) {
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[2,9,11,5] parameter(0)
  k = f32[3,2,5,7] parameter(1)
  bias = f32[7] parameter(2)
  c = f32[2,5,11,7] convolution(x, k), window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=b01f_01io->b01f
  bb = f32[2,5,11,7] broadcast(bias), dimensions={3}
  a = f32[2,5,11,7] add(c, bb)
  z = f32[] constant(0)
  zb = f32[2,5,11,7] broadcast(z), dimensions={}
  ROOT r = f32[2,5,11,7] maximum(a, zb)
})",
                               "convolution + binary_add[bias] + relu");
  // Kernel dilation, asymmetric padding, a residual added.
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[2,8,8,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  res = f32[2,7,6,4] parameter(2)
  c = f32[2,7,6,4] convolution(x, k), window={size=3x3 pad=2_1x0_2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  ROOT r = f32[2,7,6,4] add(c, res)
})",
                               "convolution + binary_add");
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[3,20,4] parameter(0)
  k = f32[5,4,2] parameter(1)
  ROOT c = f32[3,8,2] convolution(x, k), window={size=5 stride=2 pad=0_-1}, dim_labels=b0f_0io->b0f
})",
                               "convolution");
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[3,20,4] parameter(0)
  k = f32[5,4,2] parameter(1)
  ROOT c = f32[3,8,2] convolution(x, k), window={size=5 stride=2}, dim_labels=b0f_0io->b0f
})",
                               "convolution");
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[1,5,6,4,3] parameter(0)
  k = f32[2,3,2,3,2] parameter(1)
  ROOT c = f32[1,4,6,3,2] convolution(x, k), window={size=2x3x2 pad=0_0x1_1x0_0}, dim_labels=b012f_012io->b012f
})",
                               "convolution");
}

// Runs one executable of `text` on each argument set and compares every result with the
// evaluator: what a thunk keeps from one call to the next must not leak into the next.
void ExpectRepeatedCallsMatchEvaluator(const std::string& text, const std::string& expected_call,
                                       const std::vector<std::vector<Literal>>& argument_sets) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN " + expected_call));
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr("kernel ref")));
  auto reference = ParseHloModule(text);
  ASSERT_TRUE(reference.ok());
  for (const std::vector<Literal>& arguments : argument_sets) {
    auto expected = EvaluateModule(**reference, arguments);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    auto actual = (*exe)->Execute(arguments);
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, {2e-5, 2e-5});
    EXPECT_TRUE(match.ok()) << match.message();
  }
}

// Runs the current test again in a child process pinned to one CPU, where the pool (sized from
// the CPUs the process may run on) has one thread: true once the child passed or where there is
// one CPU already, false in the child itself, which goes on with the test.
bool RunAgainOnOneCpu() {
  if (std::getenv("XLENS_TEST_ON_ONE_CPU") != nullptr) return false;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0 || CPU_COUNT(&cpus) < 2) return true;
  int first = 0;
  while (!CPU_ISSET(first, &cpus)) ++first;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = fmt::format("--gtest_filter={}.{}", test->test_suite_name(), test->name());
  // The child's environment is made before the fork: between fork and exec a child of a process
  // with threads may call only async-signal-safe functions, which setenv is not.
  std::vector<char*> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) environment.push_back(*variable);
  char one_cpu[] = "XLENS_TEST_ON_ONE_CPU=1";
  environment.push_back(one_cpu);
  environment.push_back(nullptr);
  char name[] = "onednn_thunks_test";
  char* const argv[] = {name, const_cast<char*>(filter.c_str()), nullptr};
  const pid_t child = fork();
  if (child == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) execve("/proc/self/exe", argv, environment.data());
    _exit(127);
  }
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "on one CPU: status " << status;
  return true;
}

// A convolution, a bias and JAX's tanh GELU: the GELU is the thunk's own post-op where the CPU
// has AVX-512 (x / (1 + exp(-2u)), on each part's block), oneDNN's gelu_tanh elsewhere. Against
// the evaluator with a NaN, both infinities and -0 among the pixels and biases of +-1e30 (u
// overflows: x itself, or x * 0 = -0), +-40 and 0, in parts on two threads and whole on one;
// where the GELU is the thunk's, every zero's sign too.
TEST_F(OneDnnThunkTest, AConvolutionsTanhGeluMatchesTheEvaluatorOnOneAndTwoThreads) {
  const std::string text = R"(HloModule c
ENTRY e {
  x = f32[4,16,16,32] parameter(0)
  k = f32[3,3,32,32] parameter(1)
  bias = f32[32] parameter(2)
  c = f32[4,16,16,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[4,16,16,32] broadcast(bias), dimensions={3}
  v = f32[4,16,16,32] add(c, bb)
  half = f32[] constant(0.5)
  hb = f32[4,16,16,32] broadcast(half), dimensions={}
  one = f32[] constant(1)
  ob = f32[4,16,16,32] broadcast(one), dimensions={}
  g = f32[] constant(0.044715)
  gb = f32[4,16,16,32] broadcast(g), dimensions={}
  s = f32[] constant(0.797884583)
  sb = f32[4,16,16,32] broadcast(s), dimensions={}
  v2 = f32[4,16,16,32] multiply(v, v)
  v3 = f32[4,16,16,32] multiply(v2, v)
  a3 = f32[4,16,16,32] multiply(v3, gb)
  in = f32[4,16,16,32] add(v, a3)
  sc = f32[4,16,16,32] multiply(in, sb)
  t = f32[4,16,16,32] tanh(sc)
  t1 = f32[4,16,16,32] add(t, ob)
  th = f32[4,16,16,32] multiply(t1, hb)
  ROOT r = f32[4,16,16,32] multiply(v, th)
})";
  std::vector<Literal> arguments = testing::RandomArguments(text, 9);
  auto pixels = arguments[0].data<float>();
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::nanf(""), inf, -inf, -0.f};
  for (size_t i = 0; i < 4; ++i) pixels[(i * 7919 + 13) % pixels.size()] = specials[i];
  auto bias = arguments[2].data<float>();
  const float biases[] = {1e30f, -1e30f, 40.f, -40.f, 0.f};
  for (size_t j = 0; j < 5; ++j) bias[j * 3] = biases[j];
  OneDnnPostOp gelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluTanh;
  const std::string call = "convolution + binary_add[bias] + gelu_tanh";
  if (OneDnnPostOpAppliedByThunk(gelu)) {
    ExpectZerosSignedAsTheEvaluator(text, call, "", arguments);
  }
  std::vector<std::vector<Literal>> sets;
  sets.push_back(std::move(arguments));
  ExpectRepeatedCallsMatchEvaluator(text, call, sets);
  if (std::getenv("XLENS_TEST_ON_ONE_CPU") == nullptr) {
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok());
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    if (ThreadPool::Default().parallelism() >= 2) {
      EXPECT_GE(LastOneDnnCall(**exe)->Parts(), 2);
    }
  } else {
    EXPECT_EQ(ThreadPool::Default().parallelism(), 1);
  }
  RunAgainOnOneCpu();
}

// Batch-1 convolutions whose weights outweigh their images run on the weights as they lie (new
// weights each call are read, not a copy from an earlier call); constant weights are reordered
// into oneDNN's layout once and the copy serves every later call.
TEST_F(OneDnnThunkTest, ConvolutionWeightsChangingOrConstantAcrossCalls) {
  const std::string weight_bound = R"(HloModule c
ENTRY e {
  x = f32[1,2,2,64] parameter(0)
  k = f32[3,3,64,48] parameter(1)
  bias = f32[48] parameter(2)
  c = f32[1,2,2,48] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[1,2,2,48] broadcast(bias), dimensions={3}
  ROOT a = f32[1,2,2,48] add(c, bb)
})";
  ExpectRepeatedCallsMatchEvaluator(weight_bound, "convolution + binary_add[bias]",
                                    {testing::RandomArguments(weight_bound, 1),
                                     testing::RandomArguments(weight_bound, 2),
                                     testing::RandomArguments(weight_bound, 3)});
  // Not on oneDNN's im2col kernel, several times slower than its direct ones at batch 1.
  {
    auto module = ParseHloModule(weight_bound);
    ASSERT_TRUE(module.ok());
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr("gemm")));
  }
  const std::string constant = R"(HloModule c
ENTRY e {
  x = f32[2,5,5,2] parameter(0)
  k = f32[2,2,2,3] constant({ { { {1, -2, 3}, {0.5, 4, -1} }, { {2, 1, -3}, {-0.25, 2, 1} } }, { { {-1, 3, 0.5}, {1, 1, 2} }, { {0, -2, 1.5}, {3, -1, 1} } } })
  ROOT c = f32[2,4,4,3] convolution(x, k), window={size=2x2}, dim_labels=b01f_01io->b01f
})";
  ExpectRepeatedCallsMatchEvaluator(constant, "convolution",
                                    {testing::RandomArguments(constant, 1),
                                     testing::RandomArguments(constant, 2)});
}

// One convolution of parameters `lhs` and `rhs` (the rhs reversed in `reverse` first, when
// given), as JAX writes the gradients of a convolution.
std::string ConvolutionModule(const std::string& lhs, const std::string& rhs, const std::string& out,
                              const std::string& attributes, const std::string& reverse = "") {
  std::string text = "HloModule c\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs + " parameter(1)\n";
  if (!reverse.empty()) text += "  rb = " + rhs + " reverse(b), dimensions={" + reverse + "}\n";
  return text + "  ROOT c = " + out + " convolution(a, " + (reverse.empty() ? "b" : "rb") + "), " +
         attributes + "\n}\n";
}

// 1x1 convolutions with unit strides and no padding whose weights are parameters run as matmuls
// on the weights as they lie, in either order of their channel dimensions, with their epilogues
// as post-ops and their rows split over the pool; new weights on each call give new answers.
// Constant weights, strides and padding keep the convolution.
TEST_F(OneDnnThunkTest, PointwiseConvolutionsWithVariableWeightsRunAsMatmuls) {
  const std::string hwio = R"(HloModule c
ENTRY e {
  x = f32[1,5,7,13] parameter(0)
  k = f32[1,1,13,11] parameter(1)
  bias = f32[11] parameter(2)
  c = f32[1,5,7,11] convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f
  bb = f32[1,5,7,11] broadcast(bias), dimensions={3}
  a = f32[1,5,7,11] add(c, bb)
  z = f32[] constant(0)
  zb = f32[1,5,7,11] broadcast(z), dimensions={}
  ROOT r = f32[1,5,7,11] maximum(a, zb)
})";
  ExpectRepeatedCallsMatchEvaluator(hwio, "convolution + binary_add[bias] + relu as matmul",
                                    {testing::RandomArguments(hwio, 1), testing::RandomArguments(hwio, 2),
                                     testing::RandomArguments(hwio, 3)});
  // OIHW weights (the matmul reads them transposed), two images, a residual added; enough rows
  // and multiply-adds for a part per thread.
  const std::string oihw = R"(HloModule c
ENTRY e {
  x = f32[2,9,8,96] parameter(0)
  k = f32[160,96,1,1] parameter(1)
  res = f32[2,9,8,160] parameter(2)
  c = f32[2,9,8,160] convolution(x, k), window={size=1x1}, dim_labels=b01f_oi01->b01f
  ROOT a = f32[2,9,8,160] add(c, res)
})";
  const std::string parts = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "";
  ExpectOneDnnMatchesEvaluator(oihw, "convolution + binary_add as matmul", parts);
  ExpectRepeatedCallsMatchEvaluator(oihw, "convolution + binary_add as matmul",
                                    {testing::RandomArguments(oihw, 4), testing::RandomArguments(oihw, 5)});
  // 1-D and 3-D windows of one.
  ExpectOneDnnMatchesEvaluator(ConvolutionModule("f32[3,10,6]", "f32[1,6,5]", "f32[3,10,5]",
                                                 "window={size=1}, dim_labels=b0f_0io->b0f"),
                               "convolution as matmul");
  ExpectOneDnnMatchesEvaluator(ConvolutionModule("f32[1,3,4,5,6]", "f32[1,1,1,6,7]", "f32[1,3,4,5,7]",
                                                 "window={size=1x1x1}, dim_labels=b012f_012io->b012f"),
                               "convolution as matmul");
  // What stays a convolution: a stride, padding, a constant kernel.
  for (const std::string& text :
       {ConvolutionModule("f32[1,8,8,16]", "f32[1,1,16,32]", "f32[1,4,4,32]",
                          "window={size=1x1 stride=2x2}, dim_labels=b01f_01io->b01f"),
        ConvolutionModule("f32[1,8,8,16]", "f32[1,1,16,32]", "f32[1,10,10,32]",
                          "window={size=1x1 pad=1_1x1_1}, dim_labels=b01f_01io->b01f")}) {
    ExpectOneDnnMatchesEvaluator(text, "convolution;");
  }
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[1,3,3,2] parameter(0)
  k = f32[1,1,2,3] constant({ { { {1, -2, 3}, {0.5, 4, -1} } } })
  ROOT c = f32[1,3,3,3] convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f
})",
                               "convolution;");
}

// A forward convolution of one image with work enough for every thread runs in bands of output
// rows over the pool, each band reading its own input rows and keeping its share of the padding:
// strides, dilation, asymmetric and negative padding, a residual and a bias, 1-D and 2-D.
TEST_F(OneDnnThunkTest, OneImageConvolutionsRunInBandsOfRows) {
  const std::string bands = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "; 1 part on";
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[1,20,20,32] parameter(0)
  k = f32[3,3,32,64] parameter(1)
  bias = f32[64] parameter(2)
  c = f32[1,20,20,64] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[1,20,20,64] broadcast(bias), dimensions={3}
  a = f32[1,20,20,64] add(c, bb)
  z = f32[] constant(0)
  zb = f32[1,20,20,64] broadcast(z), dimensions={}
  ROOT r = f32[1,20,20,64] maximum(a, zb)
})",
                               "convolution + binary_add[bias] + relu", bands);
  ExpectOneDnnMatchesEvaluator(R"(HloModule c
ENTRY e {
  x = f32[1,23,19,16] parameter(0)
  k = f32[5,3,16,48] parameter(1)
  res = f32[1,11,19,48] parameter(2)
  c = f32[1,11,19,48] convolution(x, k), window={size=5x3 stride=2x1 pad=2_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT a = f32[1,11,19,48] add(c, res)
})",
                               "convolution + binary_add", bands);
  ExpectOneDnnMatchesEvaluator(ConvolutionModule("f32[1,21,16,24]", "f32[3,3,24,64]", "f32[1,18,16,64]",
                                                 "window={size=3x3 pad=1_0x2_2 rhs_dilate=2x2}, "
                                                 "dim_labels=b01f_01io->b01f"),
                               "convolution;", bands);
  ExpectOneDnnMatchesEvaluator(ConvolutionModule("f32[1,801,32]", "f32[5,32,64]", "f32[1,398,64]",
                                                 "window={size=5 stride=2 pad=0_-1}, dim_labels=b0f_0io->b0f"),
                               "convolution;", bands);
}

// Products under the small-product limit run in the thunk's own loops, every post-op after them
// as oneDNN would apply it, in every layout the rewriter accepts; a residual whose buffer the
// result may take is read before it is overwritten; larger products still call oneDNN.
// Operands that are slices lying whole in a larger array (one batch element of q, k and v, as
// batched-chain-split takes attention apart; a block of rows) are read in place at their offset:
// no loop copies them first. A slice cutting the minor dimension is not contiguous and is copied.
TEST_F(OneDnnThunkTest, ContiguousSlicesAreReadInPlaceAtTheirOffset) {
  const std::string text = R"(HloModule m
ENTRY e {
  q = f32[3,40,16] parameter(0)
  k = f32[3,48,16] parameter(1)
  v = f32[3,48,24] parameter(2)
  q2 = f32[1,40,16] slice(q), slice={[2:3], [0:40], [0:16]}
  k2 = f32[1,48,16] slice(k), slice={[2:3], [0:48], [0:16]}
  tk = f32[1,16,48] transpose(k2), dimensions={0,2,1}
  s = f32[1,40,48] dot(q2, tk), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  v1 = f32[1,48,24] slice(v), slice={[1:2], [0:48], [0:24]}
  o = f32[1,40,24] dot(s, v1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  rows = f32[1,8,16] slice(q), slice={[1:2], [24:32], [0:16]}
  cols = f32[1,48,16] slice(v), slice={[0:1], [0:48], [8:24]}
  r = f32[1,8,48] dot(rows, cols), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  ROOT t = (f32[1,40,24], f32[1,8,48]) tuple(o, r)
})";
  ExpectOneDnnMatchesEvaluator(text, "matmul(lhs, rhs^T)");
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  // One loop: the slice of v's minor dimension (cols) that no offset can read.
  const std::string listing = (*exe)->ThunkSequenceText();
  size_t kernels = 0;
  for (size_t at = listing.find("kernel "); at != std::string::npos; at = listing.find("kernel ", at + 1)) {
    if (at == 0 || listing[at - 1] == '\n') ++kernels;
  }
  EXPECT_EQ(kernels, 1u) << listing;
  // The thunks' own loops read the offsets too.
  SetSmallProductLimit(int64_t{1} << 20);
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
  SetSmallProductLimit(0);
  // Rows of 10 outputs, in the narrow loops where the CPU has them, from an offset of 2590
  // elements (not a whole vector: the loops load unaligned).
  ExpectOneDnnMatchesEvaluator(R"(HloModule m
ENTRY e {
  x = f32[3,37,70] parameter(0)
  w = f32[1,70,10] parameter(1)
  x1 = f32[1,37,70] slice(x), slice={[1:2], [0:37], [0:70]}
  ROOT d = f32[1,37,10] dot(x1, w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})",
                               "matmul(lhs, rhs)", NarrowProductAvailable() ? "narrow-product" : "");
}

// Heads taken as JAX writes them, reshape(slice(q)), and a reshape merging two batch elements
// into rows are the same bytes as the slices: read in place at their offsets; a whole array
// flattened into rows is read where it lies. No loop at all.
TEST_F(OneDnnThunkTest, ReshapedContiguousSlicesAreReadInPlace) {
  const std::string text = R"(HloModule m
ENTRY e {
  q = f32[3,40,16] parameter(0)
  k = f32[3,48,16] parameter(1)
  v = f32[3,48,24] parameter(2)
  q2s = f32[1,40,16] slice(q), slice={[2:3], [0:40], [0:16]}
  q2 = f32[40,16] reshape(q2s)
  k2s = f32[1,48,16] slice(k), slice={[2:3], [0:48], [0:16]}
  k2 = f32[48,16] reshape(k2s)
  s = f32[40,48] dot(q2, k2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  v1s = f32[1,48,24] slice(v), slice={[1:2], [0:48], [0:24]}
  v1 = f32[48,24] reshape(v1s)
  o = f32[40,24] dot(s, v1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  pair = f32[2,40,16] slice(q), slice={[1:3], [0:40], [0:16]}
  rows = f32[80,16] reshape(pair)
  r = f32[80,48] dot(rows, k2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  flat = f32[144,16] reshape(k)
  g = f32[144,40] dot(flat, q2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT t = (f32[40,24], f32[80,48], f32[144,40]) tuple(o, r, g)
})";
  ExpectOneDnnMatchesEvaluator(text, "matmul(lhs, rhs^T)");
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  const std::string listing = (*exe)->ThunkSequenceText();
  EXPECT_EQ(listing.rfind("kernel ", 0), std::string::npos) << listing;
  EXPECT_EQ(listing.find("\nkernel "), std::string::npos) << listing;
  SetSmallProductLimit(int64_t{1} << 20);
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
}

TEST_F(OneDnnThunkTest, SmallProductsRunInTheThunksOwnLoops) {
  SetSmallProductLimit(int64_t{1} << 15);
  const std::string small = "kernel small-product:";
  const std::string dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
  const std::string root = "  ROOT r = f32[6,8] add(d, bb)\n";
  const std::string bias = "  bias = f32[8] parameter(2)\n  bb = f32[6,8] broadcast(bias), dimensions={1}\n";
  ExpectOneDnnMatchesEvaluator(DotModule("f32[6,10]", "f32[10,8]", "f32[6,8]", "", dims, root, bias),
                               "matmul(lhs, rhs) + binary_add[bias]", small);
  ExpectOneDnnMatchesEvaluator(
      DotModule("f32[10,6]", "f32[8,10]", "f32[6,8]",
                "  ta = f32[6,10] transpose(a), dimensions={1,0}\n  tb = f32[10,8] transpose(b), dimensions={1,0}\n",
                dims, root, bias),
      "matmul(lhs^T, rhs^T) + binary_add[bias]", small);
  ExpectEveryPostOpMatchesEvaluator(small);
  // Batched, as attention's heads: [2,4,16,8] x [2,4,8,16], and a residual of the result's shape.
  ExpectOneDnnMatchesEvaluator(R"(HloModule m
ENTRY e {
  a = f32[2,4,16,8] parameter(0)
  b = f32[2,4,8,16] parameter(1)
  res = f32[2,4,16,16] parameter(2)
  d = f32[2,4,16,16] dot(a, b), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
  ROOT r = f32[2,4,16,16] add(d, res)
})",
                               "matmul(lhs, rhs) + binary_add", small);
  // Just over the limit: oneDNN.
  const std::string large = DotModule("f32[33,32]", "f32[32,32]", "f32[33,32]", "", dims, "");
  auto module = ParseHloModule(large);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr(small)));
}

// Attention over [batch..., 384, head] whose scores go through select(mask, scores, -1e9), `mask`
// a pred[384,384] made of iotas by `mask_lines` (i0: the row, i1: the column), then softmax and
// the second product. Only the scores the mask keeps need computing (product_mask.h).
// `length` other than 384 puts that sequence length everywhere 384 stands, the mask's lines included.
std::string MaskedAttention(const std::string& batch, const std::string& batch_dims, const std::string& mask_lines,
                            int head = 32, int length = 384) {
  const std::string x = "f32[" + batch + "384," + std::to_string(head) + "]", s = "f32[" + batch + "384,384]", r = "f32[" + batch + "384]";
  const int rank = batch_dims.empty() ? 2 : static_cast<int>(std::count(batch_dims.begin(), batch_dims.end(), ',')) + 3;
  const std::string last = std::to_string(rank - 1), rows = std::to_string(rank - 2);
  std::string kept;
  for (int d = 0; d < rank - 1; ++d) kept += (d ? "," : "") + std::to_string(d);
  const std::string b = batch_dims.empty() ? "" : "lhs_batch_dims={" + batch_dims + "}, ";
  const std::string rb = batch_dims.empty() ? "" : "rhs_batch_dims={" + batch_dims + "}, ";
  std::string text = "HloModule attention\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
         "  ROOT m = f32[] maximum(a, b)\n}\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
         "  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  q = " + x + " parameter(0)\n  k = " + x +
         " parameter(1)\n  v = " + x + " parameter(2)\n  d = " + s + " dot(q, k), " + b +
         "lhs_contracting_dims={" + last + "}, " + rb + "rhs_contracting_dims={" + last + "}\n"
         "  c = f32[] constant(0.125)\n  cb = " + s + " broadcast(c), dimensions={}\n"
         "  scaled = " + s + " multiply(d, cb)\n"
         "  i0 = s32[384,384] iota(), iota_dimension=0\n  i1 = s32[384,384] iota(), iota_dimension=1\n" +
         mask_lines + "  mb = pred[" + batch + "384,384] broadcast(mask), dimensions={" + rows + "," + last + "}\n"
         "  n = f32[] constant(-1e9)\n  nb = " + s + " broadcast(n), dimensions={}\n"
         "  masked = " + s + " select(mb, scaled, nb)\n"
         "  lo = f32[] constant(-inf)\n  mx = " + r + " reduce(masked, lo), dimensions={" + last + "}, to_apply=max\n"
         "  mxb = " + s + " broadcast(mx), dimensions={" + kept + "}\n"
         "  sub = " + s + " subtract(masked, mxb)\n  ex = " + s + " exponential(sub)\n"
         "  zero = f32[] constant(0)\n  sm = " + r + " reduce(ex, zero), dimensions={" + last + "}, to_apply=sum\n"
         "  smb = " + s + " broadcast(sm), dimensions={" + kept + "}\n  p = " + s + " divide(ex, smb)\n"
         "  ROOT o = " + x + " dot(p, v), " + b + "lhs_contracting_dims={" + last + "}, " + rb +
         "rhs_contracting_dims={" + rows + "}\n}\n";
  for (size_t at = text.find("384"); length != 384 && at != std::string::npos; at = text.find("384", at)) {
    text.replace(at, 3, std::to_string(length));
  }
  return text;
}

TEST_F(OneDnnThunkTest, MaskedScoresComputeOnlyTheColumnsTheMaskKeeps) {
  const std::string call = "matmul(lhs, rhs^T) + linear(0.125x+0)";
  const std::string causal = "  mask = pred[384,384] compare(i0, i1), direction=GE\n";
  // Causal, in 6 blocks of 64 rows: columns [0,64), [0,128), ... [0,384) of 384 (58%), each
  // read from the keys packed once per batch element (k = 32, a multiple of 16); the last block
  // is written in place, the others dense in their rows and then moved into place.
  const std::string packed = "kernel brg:avx512_core, keys packed; ";
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", causal), call + " on the 58% of its outputs read",
                               packed + "3 parts");
  ExpectOneDnnMatchesEvaluator(MaskedAttention("2,2,", "0,1", causal), call + " on the 58% of its outputs read",
                               packed + "4 parts");
  // A single head is one batch element: packed, it would be one part on one thread, so where the
  // pool has more it keeps the 128-row blocks, a part each (67% read).
  if (ThreadPool::Default().parallelism() >= 2) {
    ExpectOneDnnMatchesEvaluator(MaskedAttention("", "", causal), call + " on the 67% of its outputs read",
                                 "3 parts");
  }
  // A band of the last 100 positions: blocks start past column 0 (rows 128-191 read columns
  // 29-191, rounded out to the packed keys' 64: 0-191; rows 192-255 64-255), so the packed keys
  // are read from an offset.
  const std::string band =
      "  ge = pred[384,384] compare(i0, i1), direction=GE\n  dist = s32[384,384] subtract(i0, i1)\n"
      "  w = s32[] constant(100)\n  wb = s32[384,384] broadcast(w), dimensions={}\n"
      "  near = pred[384,384] compare(dist, wb), direction=LT\n  mask = pred[384,384] and(ge, near)\n";
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", band), call + " on the 42% of its outputs read", packed);
  // Causal shifted by 3 (jnp.tril(x, 3): row + 3 >= column): rows 64b to 64b + 63 read columns
  // [0, 64b + 67), their block's end rounded to 16, not to the packed keys' 64: [0, 64b + 80)
  // (62%; 72% at 64). Shifted by -70: the first 70 rows read nothing, their block none.
  const auto shifted = [](int k) {
    return "  shift = s32[] constant(" + std::to_string(k) + ")\n  kb = s32[384,384] broadcast(shift), dimensions={}\n"
           "  rk = s32[384,384] add(i0, kb)\n  mask = pred[384,384] compare(rk, i1), direction=GE\n";
  };
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", shifted(3)), call + " on the 62% of its outputs read",
                               packed + "3 parts");
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", shifted(-70)), call + " on the 42% of its outputs read",
                               packed + "3 parts");
  // Keeping the upper triangle instead: rows read from their diagonal to the end.
  ExpectOneDnnMatchesEvaluator(
      MaskedAttention("3,", "0", "  mask = pred[384,384] compare(i0, i1), direction=LE\n"),
      call + " on the 58% of its outputs read", packed);
  // An odd length, 201: the blocks narrower than the output (64, 128 and 192 columns) are
  // written dense into their rows and moved into place 201 apart; causal, the last 9 rows span
  // the row; in the band they read columns 93-200, so their block is columns 64-200, moved to
  // an offset.
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", causal, 32, 201), call + " on the 65% of its outputs read",
                               packed + "3 parts");
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", band, 32, 201), call + " on the 64% of its outputs read",
                               packed);
  // A head of 24 (not a multiple of 16) keeps the keys as they are, in blocks of 128 rows: columns
  // [0,128), [0,256), [0,384) (67%), each block packing its own.
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", causal, 24), call + " on the 67% of its outputs read",
                               "9 parts");
  // The profile rates the masked product by the multiply-adds it does: 7/12 of the product's.
  {
    auto module = ParseHloModule(MaskedAttention("3,", "0", causal));
    ASSERT_TRUE(module.ok());
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok());
    // And the second product (MaskedProbabilitiesAreContractedOnlyWhereTheyCanBeNonzero) by
    // its share of the contraction, 7/12 too.
    int masked = 0, contracted = 0;
    for (const auto& thunk : (*exe)->thunks()) {
      const auto* call = dynamic_cast<const OneDnnThunk*>(thunk.get());
      if (call == nullptr || call->ComputedShare() == 1) continue;
      EXPECT_DOUBLE_EQ(call->ComputedShare(), 7.0 / 12);
      if (thunk->ToString(0).find("outputs read") != std::string::npos) {
        ++masked;
        EXPECT_NEAR(thunk->trace_info().flops, 7.0 / 12 * 3 * 384 * 384 * (2 * 32 + 1), 3 * 384 * 384);
      } else {
        ++contracted;
        EXPECT_NEAR(thunk->trace_info().flops, 7.0 / 12 * 3 * 384 * 32 * 2 * 384, 3 * 384 * 32);
      }
    }
    EXPECT_EQ(masked, 1);
    EXPECT_EQ(contracted, 1);
  }
  // A mask that keeps more than three quarters is computed whole.
  auto module = ParseHloModule(MaskedAttention("3,", "0", "  mask = pred[384,384] compare(i0, i1), direction=NE\n"));
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok());
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr("oneDNN " + call + ";"));
}

// The second product, probabilities @ values: past each row's diagonal the probabilities are
// exp(-1e9 - max) / sum, 0 unless the row's every score is near -1e9, so each block of 64 rows is
// contracted over the columns up to its last row's diagonal only, when a call finds those
// probabilities 0 and the values it skips finite (onednn_masked_contraction.cc).
TEST_F(OneDnnThunkTest, MaskedProbabilitiesAreContractedOnlyWhereTheyCanBeNonzero) {
  const std::string causal = "  mask = pred[384,384] compare(i0, i1), direction=GE\n";
  const std::string cut = "matmul(lhs, rhs) over the ";
  const std::string share = "% of its contraction where the lhs can be nonzero";
  // 6 blocks of 64 rows over 64, 128, ... 384 columns: 58% of the multiply-adds.
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", causal), cut + "58" + share);
  // Shifted by 3 (jnp.tril(x, 3)): rows 64b to 64b + 63 over [0, 64b + 67), rounded to 16: 62%.
  ExpectOneDnnMatchesEvaluator(
      MaskedAttention("3,", "0",
                      "  shift = s32[] constant(3)\n  kb = s32[384,384] broadcast(shift), dimensions={}\n"
                      "  rk = s32[384,384] add(i0, kb)\n  mask = pred[384,384] compare(rk, i1), direction=GE\n"),
      cut + "62" + share);
  ExpectOneDnnMatchesEvaluator(MaskedAttention("2,2,", "0,1", causal), cut + "58" + share);
  // A single head would be one part on one thread: where the pool has more, it keeps its rows'
  // parts over the whole contraction.
  if (ThreadPool::Default().parallelism() >= 2) {
    ExpectOneDnnMatchesEvaluator(MaskedAttention("", "", causal), "matmul(lhs, rhs);");
  }
  // An odd length: 201 rows in blocks of 64, 64, 64 and 9 over 64, 128, 192 and 201 columns (65%).
  ExpectOneDnnMatchesEvaluator(MaskedAttention("3,", "0", causal, 24, 201), cut + "65" + share);
  // The upper triangle kept (LE) leaves nothing past the rows' ends, and a mask that keeps all
  // but the diagonal (NE) nothing worth skipping: contracted whole.
  for (const char* direction : {"LE", "NE"}) {
    const std::string text = MaskedAttention(
        "3,", "0", std::string("  mask = pred[384,384] compare(i0, i1), direction=") + direction + "\n");
    ExpectOneDnnMatchesEvaluator(text, "matmul(lhs, rhs);");
  }
  // The checks at run time. Row 0 of batch element 1 with a score of -4e9 for its one column, below
  // the mask's -1e9: its masked probabilities are 1/383 each, not 0. And an infinity among batch
  // element 2's values past the first blocks' columns: 0 * inf is NaN in the whole product, for
  // every row before it. Skipping either would give other numbers.
  const std::string text = MaskedAttention("3,", "0", causal);
  std::vector<Literal> arguments = testing::RandomArguments(text);
  std::span<float> q = arguments[0].data<float>(), k = arguments[1].data<float>(), v = arguments[2].data<float>();
  for (int64_t i = 0; i < 32; ++i) {
    q[384 * 32 + i] = 1e9f;
    k[384 * 32 + i] = -1.0f;
  }
  v[2 * 384 * 32 + 300 * 32 + 5] = std::numeric_limits<float>::infinity();
  Literal result = testing::ExpectMatchesEvaluator(text, std::move(arguments), {2e-5, 2e-5});
  ASSERT_EQ(result.element_count(), 3 * 384 * 32);
  EXPECT_TRUE(std::isnan(result.data<float>()[2 * 384 * 32 + 299 * 32 + 5]));
  EXPECT_NEAR(result.data<float>()[384 * 32], 0, 0.2);  // the mean of 383 values in [-1, 1]
  // A NaN in the last value of a length that leaves the check a tail of fewer than 64 floats
  // ((201 - 64) x 24 = 3288 = 51 x 64 + 24) in batch element 1: every row's column 23 is NaN.
  const std::string odd = MaskedAttention("3,", "0", causal, 24, 201);
  std::vector<Literal> odd_arguments = testing::RandomArguments(odd);
  odd_arguments[2].data<float>()[201 * 24 + 200 * 24 + 23] = std::numeric_limits<float>::quiet_NaN();
  Literal odd_result = testing::ExpectMatchesEvaluator(odd, std::move(odd_arguments), {2e-5, 2e-5});
  ASSERT_EQ(odd_result.element_count(), 3 * 201 * 24);
  EXPECT_TRUE(std::isnan(odd_result.data<float>()[201 * 24 + 23]));
  EXPECT_FALSE(std::isnan(odd_result.data<float>()[23]));
}

// The gradients of the forward convolutions above (and of a NCHW one and a stride-3 VALID one)
// with respect to the input and to the kernel, exactly as jax.grad lowers them.
TEST_F(OneDnnThunkTest, JaxGradientConvolutionsRunAsBackwardPasses) {
  struct Case {
    std::string lhs, rhs, out, attributes, reverse, call;
  };
  const std::string data = "convolution_backward_data", weights = "convolution_backward_weights";
  const std::vector<Case> cases = {
      // NHWC, stride 2x1, asymmetric padding.
      {"f32[2,5,11,7]", "f32[3,2,5,7]", "f32[2,9,11,5]",
       "window={size=3x2 pad=1_1x1_0 lhs_dilate=2x1}, dim_labels=b01f_01oi->b01f", "0,1", data},
      {"f32[2,9,11,5]", "f32[2,5,11,7]", "f32[3,2,5,7]",
       "window={size=5x11 pad=1_1x0_1 rhs_dilate=2x1}, dim_labels=f01b_i01o->01bf", "", weights},
      // Kernel dilation 2x2: the gradients' window dilation and stride.
      {"f32[2,7,6,4]", "f32[3,3,3,4]", "f32[2,8,8,3]",
       "window={size=3x3 pad=2_3x4_2 rhs_dilate=2x2}, dim_labels=b01f_01oi->b01f", "0,1", data},
      {"f32[2,8,8,3]", "f32[2,7,6,4]", "f32[3,3,3,4]",
       "window={size=7x6 stride=2x2 pad=2_1x0_2}, dim_labels=f01b_i01o->01bf", "", weights},
      // 1-D, stride 2, VALID: the kernel's gradient crops the input (negative padding).
      {"f32[3,8,2]", "f32[5,4,2]", "f32[3,20,4]",
       "window={size=5 pad=4_5 lhs_dilate=2}, dim_labels=b0f_0oi->b0f", "0", data},
      {"f32[3,20,4]", "f32[3,8,2]", "f32[5,4,2]",
       "window={size=8 pad=0_-1 rhs_dilate=2}, dim_labels=f0b_i0o->0bf", "", weights},
      // 3-D, stride 1: the input's gradient is a reversed convolution without dilation.
      {"f32[1,4,6,3,2]", "f32[2,3,2,3,2]", "f32[1,5,6,4,3]",
       "window={size=2x3x2 pad=1_1x1_1x1_1}, dim_labels=b012f_012oi->b012f", "0,1,2", data},
      {"f32[1,5,6,4,3]", "f32[1,4,6,3,2]", "f32[2,3,2,3,2]",
       "window={size=4x6x3 pad=0_0x1_1x0_0}, dim_labels=f012b_i012o->012bf", "", weights},
      // NCHW / OIHW: the input's gradient reads a channels-last transpose of the output's; the
      // kernel's gradient cannot read NCHW activations in place and runs as a forward
      // convolution on the transposes conv-canonicalization makes.
      {"f32[2,4,5,4]", "f32[4,3,3,3]", "f32[2,3,9,8]",
       "window={size=3x3 pad=1_1x2_1 lhs_dilate=2x2}, dim_labels=bf01_io01->bf01", "2,3", data},
      {"f32[2,3,9,8]", "f32[2,4,5,4]", "f32[4,3,3,3]",
       "window={size=5x4 pad=1_1x0_1 rhs_dilate=2x2}, dim_labels=fb01_io01->fb01", "", "convolution;"},
      // Stride 3, VALID on 10: the last input row and column get no gradient.
      {"f32[2,3,3,4]", "f32[3,3,3,4]", "f32[2,10,10,3]",
       "window={size=3x3 pad=2_3x2_3 lhs_dilate=3x3}, dim_labels=b01f_01oi->b01f", "0,1", data},
      {"f32[2,10,10,3]", "f32[2,3,3,4]", "f32[3,3,3,4]",
       "window={size=3x3 pad=0_-1x0_-1 rhs_dilate=3x3}, dim_labels=f01b_i01o->01bf", "", weights},
      // The kernel reversed by the window instead of a reverse.
      {"f32[2,5,11,7]", "f32[3,2,5,7]", "f32[2,9,11,5]",
       "window={size=3x2 pad=1_1x1_0 lhs_dilate=2x1 rhs_reversal=1x1}, dim_labels=b01f_01oi->b01f", "", data},
  };
  for (const Case& c : cases) {
    ExpectOneDnnMatchesEvaluator(ConvolutionModule(c.lhs, c.rhs, c.out, c.attributes, c.reverse), c.call);
  }
}

TEST_F(OneDnnThunkTest, GradientsSplitOverThePoolAddUp) {
  // Enough images for a part per thread: the kernel's gradient is summed over the parts.
  const std::string parts = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "";
  ExpectOneDnnMatchesEvaluator(
      ConvolutionModule("f32[6,12,12,3]", "f32[6,6,6,5]", "f32[3,3,3,5]",
                        "window={size=6x6 pad=0_1x0_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf"),
      "convolution_backward_weights", parts);
  ExpectOneDnnMatchesEvaluator(
      ConvolutionModule("f32[6,6,6,5]", "f32[3,3,3,5]", "f32[6,12,12,3]",
                        "window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f", "0,1"),
      "convolution_backward_data", parts);
}

TEST_F(OneDnnThunkTest, WhatOneDnnCannotTakeRunsWithoutIt) {
  const std::vector<std::string> modules = {
      // Base dilation with a kernel that is not reversed: no backward pass of oneDNN's.
      ConvolutionModule("f32[2,5,5,3]", "f32[3,3,3,4]", "f32[2,10,10,4]",
                        "window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"),
      // Base dilation and a stride together.
      ConvolutionModule("f32[2,9,3]", "f32[3,3,4]", "f32[2,9,4]",
                        "window={size=3 stride=2 pad=1_1 lhs_dilate=2}, dim_labels=b0f_0io->b0f", "0"),
      // Negative low padding.
      ConvolutionModule("f32[2,6,3]", "f32[3,3,4]", "f32[2,5,4]",
                        "window={size=3 pad=-1_2}, dim_labels=b0f_0io->b0f"),
      // A batch-grouped convolution whose activations do not lie as a kernel's gradient's do
      // (the grouped cases oneDNN takes are onednn_grouped_convolution_test's).
      ConvolutionModule("f32[4,6,6,3]", "f32[3,3,3,4]", "f32[2,4,4,4]",
                        "window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=2"),
  };
  for (const std::string& text : modules) {
    SCOPED_TRACE(text);
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok()) << module.status().message();
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(HasSubstr("oneDNN")));
    testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
  }
}

}  // namespace
}  // namespace xlens::runtime
