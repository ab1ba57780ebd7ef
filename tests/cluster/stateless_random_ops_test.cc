// The stateless random lowerings (tf2xla/stateless_random_ops.cc) against
// tf.function(jit_compile=True) of TensorFlow 2.21 on CPU: StatelessRandomGetKeyCounter and
// StatelessRandomUniformV2 (Keras 3's dropout) give its keys, counters and floats bit for bit, on
// the reference evaluator and the CPU backend, as do the uniform integers; the normals and
// truncated normals agree within rounding. The goldens were printed by TensorFlow for these
// seeds. Op by op the CPU kernel (as TensorFlow's) gives other floats from the same key.
#include <gtest/gtest.h>

#include <cstring>

#include "function_body_test_util.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::Output;
using graph::Tensor;
namespace ops = graph::ops;

struct Golden {
  Tensor seed;
  uint64_t key, counter1;
  std::vector<uint32_t> uniform_bits;  // of a [2, 3] uniform
};

// `body` compiled and run on the CPU backend or on the reference evaluator.
StatusOr<Literal> CompileAndRun(const cluster_testing::FunctionBody& body, bool cpu) {
  ASSIGN_OR_RETURN(XlaCompilationResult compiled, body.Compile());
  ASSIGN_OR_RETURN(std::vector<Literal> params, body.Params(compiled));
  if (!cpu) return EvaluateModule(*compiled.module, params);
  return cluster_testing::RunOnCpu(std::move(compiled), params);
}

// Compiles seed -> GetKeyCounter -> UniformV2([2, 3], alg auto-select); returns (key, counter,
// uniform) as run on the CPU backend or on the reference evaluator.
std::vector<Literal> RunDropoutRng(const Tensor& seed, const std::string& key_counter_op,
                                   bool cpu) {
  cluster_testing::FunctionBody body("dropout_rng");
  Output arg = body.Arg(seed);
  Output key = body.Op(key_counter_op, {arg}, {{"Tseed", AttrValue::Type(seed.dtype())}});
  Output counter(key.node, 1);
  body.Ret(key);
  body.Ret(counter);
  body.Ret(body.Op("StatelessRandomUniformV2", {ops::Input({2, 3}), key, counter, ops::Input(3)},
                   {{"dtype", AttrValue::Type(graph::DT_FLOAT)}}));
  StatusOr<Literal> result = CompileAndRun(body, cpu);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return {};
  return std::move(result->tuple_elements());
}

TEST(StatelessRandomXlaTest, DropoutStreamsAreTensorFlowsCompiledOnes) {
  const std::vector<Golden> goldens = {
      {Tensor::Vector<int32_t>(graph::DT_INT32, {1, 2}), 10413732777507651514ULL,
       17830669156045600267ULL,
       {0x3e83d814, 0x3ecf3128, 0x3f6bff84, 0x3db0a430, 0x3b22d000, 0x3f71531c}},
      // A negative int32 seed: its words zero-extended, as XLA's (the CPU kernel sign-extends);
      // an int64 seed: its low 32 bits only, as XLA's (the CPU kernel keeps all 64).
      {Tensor::Vector<int32_t>(graph::DT_INT32, {-3, 7}), 14441907921221984835ULL,
       16598574613960052903ULL,
       {0x3c8b4280, 0x3ed3a6e8, 0x3e0b6640, 0x3dbd5c30, 0x3dff7480, 0x3ee23ad0}},
      {Tensor::Vector<int64_t>(graph::DT_INT64, {123456789012LL, -5}), 10649559336812247668ULL,
       591657796230754530ULL,
       {0x3f32308e, 0x3f1d41fc, 0x3f104f1e, 0x3e921098, 0x3f7a6cb8, 0x3ee3b684}},
  };
  for (const Golden& g : goldens) {
    for (const char* op : {"StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg"}) {
      for (bool cpu : {false, true}) {
        SCOPED_TRACE(std::string(op) + (cpu ? " cpu " : " evaluator ") + g.seed.DebugString());
        std::vector<Literal> out = RunDropoutRng(g.seed, op, cpu);
        ASSERT_EQ(out.size(), 3u);
        EXPECT_EQ(out[0].data<uint64_t>()[0], g.key);
        EXPECT_EQ(out[1].data<uint64_t>()[0], 0u);
        EXPECT_EQ(out[1].data<uint64_t>()[1], g.counter1);
        for (size_t i = 0; i < g.uniform_bits.size(); ++i) {
          uint32_t bits;
          std::memcpy(&bits, &out[2].data<float>()[i], 4);
          EXPECT_EQ(bits, g.uniform_bits[i]) << "element " << i;
        }
      }
    }
  }
}

// Normals: Box-Muller on pairs of the uniforms, an odd last dimension generated one longer and its
// last column dropped (TensorFlow's [3, 5] normal skips the sixth value of its [64] one).
TEST(StatelessRandomXlaTest, NormalsAreTensorFlowsCompiledOnes) {
  const std::vector<float> stream = {0.26183963f, 1.0231868f,   0.15502696f, -1.0682782f,
                                     2.5638773f,  -0.39442232f, 0.8950776f,  -0.5095947f};
  for (bool odd : {false, true}) {
    cluster_testing::FunctionBody body;
    Output key = body.Op("StatelessRandomGetKeyCounter",
                         {body.Arg(Tensor::Vector<int32_t>(graph::DT_INT32, {5, -9}))},
                         {{"Tseed", AttrValue::Type(graph::DT_INT32)}});
    body.Ret(body.Op("StatelessRandomNormalV2",
                     {odd ? ops::Input({3, 5}) : ops::Input({64}), key, Output(key.node, 1),
                      ops::Input(3)},
                     {{"dtype", AttrValue::Type(graph::DT_FLOAT)}}));
    auto result = CompileAndRun(body, /*cpu=*/false);
    ASSERT_TRUE(result.ok()) << result.status().message();
    const Literal& out = result->shape().IsTuple() ? result->tuple_elements()[0] : *result;
    const std::vector<int> picks = odd ? std::vector<int>{0, 1, 2, 3, 4, 6}
                                       : std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7};
    for (size_t i = 0; i < picks.size(); ++i) {
      EXPECT_NEAR(out.data<float>()[i], stream[picks[i]], 1e-6) << (odd ? "[3, 5] " : "[64] ") << i;
    }
  }
}

// Compiles seed [5, -9] -> GetKeyCounter -> `op` (alg auto-select, then `extra` inputs) of
// `shape` and `dtype`, and runs it on the reference evaluator or the CPU backend.
Literal RunKeyCounterOp(const std::string& op, std::vector<int32_t> shape, graph::DataType dtype,
                        std::vector<ops::Input> extra, bool cpu) {
  cluster_testing::FunctionBody body;
  Output key = body.Op("StatelessRandomGetKeyCounter",
                       {body.Arg(Tensor::Vector<int32_t>(graph::DT_INT32, {5, -9}))},
                       {{"Tseed", AttrValue::Type(graph::DT_INT32)}});
  std::vector<ops::Input> inputs = {Tensor::Vector<int32_t>(graph::DT_INT32, shape), key,
                                    Output(key.node, 1), body.Op("StatelessRandomGetAlg", {}, {})};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  body.Ret(body.Op(op, inputs, {{"dtype", AttrValue::Type(dtype)}}));
  StatusOr<Literal> result = CompileAndRun(body, cpu);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return Literal();
  return result->shape().IsTuple() ? std::move(result->tuple_elements()[0]) : std::move(*result);
}

// Truncated normals: the inverse normal CDF of uniforms in [FLT_MIN, 1) between the CDF at -2
// and 2, within the rounding of erfinv's log1p of TensorFlow's compiled ones.
TEST(StatelessRandomXlaTest, TruncatedNormalsAreTensorFlowsCompiledOnes) {
  const std::vector<float> want = {
      0.1743507981300354f,  -1.5480186939239502f, 0.1402568221092224f,  -0.05490419641137123f,
      -1.5914381742477417f, -0.5693381428718567f, 0.21299494802951813f, -0.41246381402015686f};
  for (bool cpu : {false, true}) {
    Literal out = RunKeyCounterOp("StatelessTruncatedNormalV2", {8}, graph::DT_FLOAT, {}, cpu);
    ASSERT_EQ(out.shape().dimensions(), std::vector<int64_t>{8});
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(out.data<float>()[i], want[i], 5e-7) << (cpu ? "cpu " : "evaluator ") << i;
    }
  }
}

// Uniform integers: each Philox word (two for 64 bits) modulo the range, exactly.
TEST(StatelessRandomXlaTest, UniformIntegersAreTensorFlowsCompiledOnes) {
  for (bool cpu : {false, true}) {
    Literal narrow = RunKeyCounterOp("StatelessRandomUniformIntV2", {6}, graph::DT_INT32,
                                     {ops::Input(-7), ops::Input(1000)}, cpu);
    ASSERT_EQ(narrow.shape().dimensions(), std::vector<int64_t>{6});
    const std::vector<int32_t> want32 = {777, 19, 947, 270, 318, 382};
    for (size_t i = 0; i < want32.size(); ++i) {
      EXPECT_EQ(narrow.data<int32_t>()[i], want32[i]) << (cpu ? "cpu " : "evaluator ") << i;
    }
    Literal wide = RunKeyCounterOp(
        "StatelessRandomUniformIntV2", {4}, graph::DT_INT64,
        {Tensor::Scalar<int64_t>(graph::DT_INT64, -(int64_t{1} << 40)),
         Tensor::Scalar<int64_t>(graph::DT_INT64, int64_t{1} << 41)},
        cpu);
    ASSERT_EQ(wide.shape().dimensions(), std::vector<int64_t>{4});
    const std::vector<int64_t> want64 = {-156454903617LL, -774990641260LL, 1443257526155LL,
                                         1252362447622LL};
    for (size_t i = 0; i < want64.size(); ++i) {
      EXPECT_EQ(wide.data<int64_t>()[i], want64[i]) << (cpu ? "cpu " : "evaluator ") << i;
    }
  }
}

}  // namespace
}  // namespace xlens::cluster
