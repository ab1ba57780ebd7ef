// Checks the Philox random ops against values TensorFlow 2.21's CPU kernels produced
// (testdata/philox/expected.json, written by testdata/philox/generate.py), bit for bit.
#include "compiler/graph/philox_random.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xlens::graph {
namespace {

using nlohmann::json;

const json& Expected() {
  static const json* expected = [] {
    std::ifstream in(std::string(XLENS_TESTDATA_DIR) + "/philox/expected.json");
    auto* parsed = new json(json::parse(in, nullptr, /*allow_exceptions=*/false));
    return parsed;
  }();
  return *expected;
}

// Fills n values of `dtype` for `op` from `gen` and returns them as the JSON encodes them:
// floats as bit patterns, integers as values.
std::vector<uint64_t> Draw(const std::string& op, const std::string& dtype, const json& c,
                           const PhiloxRandom& gen, int64_t n) {
  std::vector<uint64_t> out;
  const bool uniform = op.starts_with("RandomUniform") || op.starts_with("StatelessRandomUniform");
  const bool is_int = op.find("UniformInt") != std::string::npos;
  const bool normal = op.find("Normal") != std::string::npos && op.find("Truncated") == std::string::npos;
  if (is_int && dtype == "int32") {
    std::vector<int32_t> v(n);
    FillUniformInt(gen, c["minval"].get<int32_t>(), c["maxval"].get<int32_t>(), v.data(), n);
    for (int32_t x : v) out.push_back(static_cast<uint64_t>(static_cast<int64_t>(x)));
  } else if (is_int && dtype == "int64") {
    std::vector<int64_t> v(n);
    FillUniformInt(gen, c["minval"].get<int64_t>(), c["maxval"].get<int64_t>(), v.data(), n);
    for (int64_t x : v) out.push_back(static_cast<uint64_t>(x));
  } else if (dtype == "float32") {
    std::vector<float> v(n);
    if (uniform) FillUniform(gen, v.data(), n);
    else if (normal) FillNormal(gen, v.data(), n);
    else FillTruncatedNormal(gen, v.data(), n);
    for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
  } else if (dtype == "float64") {
    std::vector<double> v(n);
    if (uniform) FillUniform(gen, v.data(), n);
    else if (normal) FillNormal(gen, v.data(), n);
    else FillTruncatedNormal(gen, v.data(), n);
    for (double x : v) out.push_back(std::bit_cast<uint64_t>(x));
  } else {
    ADD_FAILURE() << "unknown dtype " << dtype;
  }
  return out;
}

std::vector<uint64_t> Encoded(const json& values, const std::string& dtype) {
  std::vector<uint64_t> out;
  for (const json& v : values) {
    out.push_back(dtype == "int32" || dtype == "int64"
                      ? static_cast<uint64_t>(v.get<int64_t>())
                      : v.get<uint64_t>());
  }
  return out;
}

int64_t NumElements(const json& shape) {
  int64_t n = 1;
  for (const json& d : shape) n *= d.get<int64_t>();
  return n;
}

// Compares all values and reports the first few that differ, with the case that drew them.
void ExpectSame(const std::vector<uint64_t>& got, const std::vector<uint64_t>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 3; ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << ": element " << i << " is 0x" << std::hex << got[i]
                    << ", TensorFlow drew 0x" << want[i];
      ++reported;
    }
  }
}

uint64_t SeedWord(const json& seed, int i, const std::string& seed_dtype) {
  // An int32 seed is widened with its sign, as TensorFlow's GenerateKey reads it.
  const int64_t v = seed_dtype == "int32" ? static_cast<int64_t>(seed[i].get<int32_t>())
                                          : seed[i].get<int64_t>();
  return static_cast<uint64_t>(v);
}

TEST(PhiloxRandomTest, ExpectedValuesAreThere) {
  ASSERT_FALSE(Expected().is_discarded()) << "cannot read philox/expected.json";
  EXPECT_GT(Expected()["stateful"].size(), 0u);
}

// The linreg_tf1 corpus case initialises its variables with tf.compat.v1 random_uniform
// initialisers: RandomUniform(shape [1], seed 0, seed2 from the op-level seed counter) mapped
// to [-sqrt(3), sqrt(3)) as minval + u * (maxval - minval). The run recorded W_init and b_init.
TEST(PhiloxRandomTest, ReproducesLinregInitialisers) {
  const float minval = -1.7320508f, maxval = 1.7320508f;
  auto init = [&](int64_t seed2) {
    GuardedPhilox generator;
    generator.Init(0, seed2);
    float u;
    FillUniform(generator.ReserveRandomOutputs(1), &u, 1);
    const float range = maxval - minval;
    const float scaled = u * range;
    return scaled + minval;
  };
  EXPECT_EQ(static_cast<double>(init(2147483647)), -1.6636104583740234);
  EXPECT_EQ(static_cast<double>(init(1)), 0.13762938976287842);
}

TEST(PhiloxRandomTest, StatefulOpsMatchTensorFlowAcrossRuns) {
  ASSERT_FALSE(Expected().is_discarded());
  for (const json& c : Expected()["stateful"]) {
    const std::string op = c["op"], dtype = c["dtype"];
    const int64_t n = NumElements(c["shape"]);
    GuardedPhilox generator;
    generator.Init(c["seed"].get<int64_t>(), c["seed2"].get<int64_t>());
    int run = 0;
    for (const json& draw : c["draws"]) {
      const std::string what = op + " " + dtype + " n=" + std::to_string(n) + " seed=" +
                               c["seed"].dump() + "/" + c["seed2"].dump() + " run " +
                               std::to_string(run++);
      ExpectSame(Draw(op, dtype, c, generator.ReserveRandomOutputs(n), n), Encoded(draw, dtype),
                 what);
    }
  }
}

TEST(PhiloxRandomTest, StatelessOpsMatchTensorFlow) {
  ASSERT_FALSE(Expected().is_discarded());
  for (const json& c : Expected()["stateless"]) {
    const std::string op = c["op"], dtype = c["dtype"], seed_dtype = c["seed_dtype"];
    const int64_t n = NumElements(c["shape"]);
    const PhiloxRandom gen = StatelessPhilox(SeedWord(c["seed"], 0, seed_dtype),
                                             SeedWord(c["seed"], 1, seed_dtype));
    ExpectSame(Draw(op, dtype, c, gen, n), Encoded(c["values"], dtype),
               op + " " + dtype + " n=" + std::to_string(n) + " seed=" + c["seed"].dump());
  }
}

TEST(PhiloxRandomTest, StatelessV2OpsMatchTensorFlow) {
  ASSERT_FALSE(Expected().is_discarded());
  for (const json& c : Expected()["stateless_v2"]) {
    const std::string op = c["op"], dtype = c["dtype"];
    const int64_t n = NumElements(c["shape"]);
    ASSERT_EQ(ResolveRngAlg(c["alg"].get<int>()), kRngAlgPhilox);
    const uint64_t key[1] = {c["key"][0].get<uint64_t>()};
    const uint64_t counter[2] = {c["counter"][0].get<uint64_t>(), c["counter"][1].get<uint64_t>()};
    ExpectSame(Draw(op, dtype, c, PhiloxFromKeyCounter(key, counter), n),
               Encoded(c["values"], dtype),
               op + " " + dtype + " n=" + std::to_string(n) + " key=" + c["key"].dump() +
                   " counter=" + c["counter"].dump());
  }
}

TEST(PhiloxRandomTest, GetKeyCounterMatchesTensorFlow) {
  ASSERT_FALSE(Expected().is_discarded());
  for (const json& c : Expected()["get_key_counter"]) {
    const std::string seed_dtype = c["seed_dtype"];
    uint64_t key[1], counter[2];
    GetKeyCounter(SeedWord(c["seed"], 0, seed_dtype), SeedWord(c["seed"], 1, seed_dtype), key,
                  counter);
    EXPECT_EQ(key[0], c["key"][0].get<uint64_t>()) << c["seed"].dump();
    EXPECT_EQ(counter[0], c["counter"][0].get<uint64_t>()) << c["seed"].dump();
    EXPECT_EQ(counter[1], c["counter"][1].get<uint64_t>()) << c["seed"].dump();
  }
}

// A stateless V1 op and a V2 op fed with StatelessRandomGetKeyCounter of the same seed draw the
// same values: both start from GenerateKey.
TEST(PhiloxRandomTest, V1SeedEqualsV2KeyCounter) {
  uint64_t key[1], counter[2];
  GetKeyCounter(42, static_cast<uint64_t>(-7), key, counter);
  float a[9], b[9];
  FillTruncatedNormal(StatelessPhilox(42, static_cast<uint64_t>(-7)), a, 9);
  FillTruncatedNormal(PhiloxFromKeyCounter(key, counter), b, 9);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]));
}

TEST(PhiloxRandomTest, SkipCarriesAcrossCounterWords) {
  PhiloxRandom gen(PhiloxRandom::ResultType{0xffffffffu, 0xffffffffu, 0xffffffffu, 7}, {1, 2});
  gen.Skip(1);
  EXPECT_EQ(gen.counter(), (PhiloxRandom::ResultType{0, 0, 0, 8}));
  gen.Skip(0x1'0000'0001ull);
  EXPECT_EQ(gen.counter(), (PhiloxRandom::ResultType{1, 1, 0, 8}));
  PhiloxRandom stepped = gen;
  stepped();
  gen.Skip(1);
  EXPECT_EQ(stepped.counter(), gen.counter());
}

// Philox4x32-10 known-answer vectors from the Random123 distribution (kat_vectors).
TEST(PhiloxRandomTest, Random123KnownAnswers) {
  EXPECT_EQ(PhiloxRandom({0, 0, 0, 0}, {0, 0})(),
            (PhiloxRandom::ResultType{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(PhiloxRandom({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                         {0xffffffff, 0xffffffff})(),
            (PhiloxRandom::ResultType{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(PhiloxRandom({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                         {0xa4093822, 0x299f31d0})(),
            (PhiloxRandom::ResultType{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

}  // namespace
}  // namespace xlens::graph
