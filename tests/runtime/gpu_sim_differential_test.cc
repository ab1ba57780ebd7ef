// The GPU backend's kernels on the GPU simulator against the reference evaluator: every corpus
// module the GPU backend compiles, and 2,000 random modules per run in 8 shards (fixed seed;
// XLENS_RANDOM_MODULES=N runs N instead, XLENS_RANDOM_SEED=S another sequence). What the GPU
// backend refuses must be refused by name (custom-calls, what code generation does not support);
// each shard prints how many it refused and why.
#include <cstdlib>
#include <map>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/random_module_generator.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

constexpr int kShards = 8;
// The evaluator is an interpreter (about 1e8 simple operations a second): corpus modules that
// need more work than this are left to the CPU backend's corpus test, which keeps this test to a
// few seconds in CI.
constexpr double kMaxEvaluatorWork = 3e8;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtoll(value, nullptr, 10) : fallback;
}

// Whether `message` is one of the GPU backend's named refusals.
bool IsNamedRefusal(const std::string& message) {
  for (const char* phrase : {"runs on the CPU backend only", "cannot run on the GPU backend", "no GPU implementation",
                             "not supported", "cannot"}) {
    if (message.find(phrase) != std::string::npos) return true;
  }
  return false;
}

// Rough operation count of evaluating the module once: elements, times the window or the
// contracted length for convolutions and dots.
double EvaluatorWork(const HloModule& module) {
  double work = 0;
  for (const HloComputation* c : module.computations()) {
    for (const HloInstruction* hlo : c->instructions()) {
      double elements = 0;
      hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
        if (s.IsArray() && s.is_static()) elements += static_cast<double>(s.num_elements());
      });
      double per_element = 1;
      if (hlo->opcode() == HloOpcode::kConvolution) {
        for (const WindowDimension& w : hlo->window->dimensions) per_element *= w.size;
        per_element *= hlo->operand(1)->shape().dimensions(
            hlo->convolution_dimension_numbers->kernel_input_feature_dimension);
      } else if (hlo->opcode() == HloOpcode::kDot) {
        for (int64_t d : hlo->dot_dimension_numbers->lhs_contracting_dimensions) {
          per_element *= hlo->operand(0)->shape().dimensions(d);
        }
      }
      work += elements * per_element;
    }
  }
  return work;
}

std::unique_ptr<GpuSimDevice> OpenDevice() {
  auto device = OpenSimulatedGpuDevice();
  return device.ok() ? std::move(*device) : nullptr;
}

class GpuSimCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuSimCorpusTest, AgreesWithTheEvaluator) {
  const std::string dir = xlens::testing::HloCorpusDir();
  if (dir.empty()) GTEST_SKIP() << "corpus absent under " << XLENS_SHARED_DIR;
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  const std::string path = dir + "/" + GetParam() + ".hlo";
  auto module = ParseHloModule(xlens::testing::ReadTestFile(path), ParseOptions{.verify = true, .filename = path});
  if (!module.ok()) GTEST_SKIP() << "does not verify: " << module.status().message();
  if (double work = EvaluatorWork(**module); work > kMaxEvaluatorWork) {
    GTEST_SKIP() << "too large for the reference evaluator here: about " << work << " operations";
  }
  std::mt19937_64 rng(0x5eed);
  std::vector<Literal> arguments;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    auto literal = MakeRandomLiteral(p->shape(), rng);
    if (!literal.ok()) GTEST_SKIP() << "no random input: " << literal.status().message();
    arguments.push_back(std::move(*literal));
  }
  auto expected = EvaluateModule(**module, arguments);
  if (!expected.ok()) GTEST_SKIP() << "the evaluator refuses it: " << expected.status().message();
  auto executable = GpuExecutable::Create(std::move(*module), {}, *device);
  if (!executable.ok()) {
    EXPECT_TRUE(IsNamedRefusal(executable.status().message())) << executable.status().message();
    GTEST_SKIP() << "the GPU backend refuses it: " << executable.status().message();
  }
  auto actual = (*executable)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
  EXPECT_TRUE(match.ok()) << match.message();
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuSimCorpusTest, ::testing::ValuesIn(xlens::testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return xlens::testing::TestNameOf(info.param);
                         });

class GpuSimRandomModuleTest : public ::testing::TestWithParam<int> {};

TEST_P(GpuSimRandomModuleTest, CompiledModulesAgreeWithTheEvaluator) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  const int64_t total = EnvOr("XLENS_RANDOM_MODULES", 2000);
  const uint64_t seed = static_cast<uint64_t>(EnvOr("XLENS_RANDOM_SEED", 20261122));
  const int shard = GetParam();
  int64_t ran = 0, refused = 0;
  std::map<std::string, int64_t> reasons;  // refusal messages without the instruction's name
  for (int64_t id = shard; id < total; id += kShards) {
    xlens::testing::RandomModuleGenerator generator(seed * 1000003 + id);
    const std::string text = generator.Generate(id);
    SCOPED_TRACE(text);
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "random"});
    ASSERT_TRUE(module.ok()) << "the generator made an invalid module: " << module.status().message();
    std::mt19937_64 rng(id);
    std::vector<Literal> arguments;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      auto literal = MakeRandomLiteral(p->shape(), rng);
      ASSERT_TRUE(literal.ok()) << literal.status().message();
      arguments.push_back(std::move(*literal));
    }
    auto expected = EvaluateModule(**module, arguments);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    auto executable = GpuExecutable::Create(std::move(*module), {}, *device);
    if (!executable.ok()) {
      ASSERT_TRUE(IsNamedRefusal(executable.status().message())) << executable.status().message();
      ++refused;
      const std::string message = executable.status().message();
      const size_t colon = message.rfind(": ");
      ++reasons[colon == std::string::npos ? message : message.substr(colon + 2)];
      continue;
    }
    auto actual = (*executable)->Execute(arguments);
    ASSERT_TRUE(actual.ok()) << "module " << id << ": " << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
    ASSERT_TRUE(match.ok()) << "module " << id << ": " << match.message();
    ++ran;
  }
  std::printf("shard %d: %lld modules agree with the evaluator on the simulator, %lld refused by the GPU backend\n",
              shard, static_cast<long long>(ran), static_cast<long long>(refused));
  for (const auto& [reason, count] : reasons) {
    std::printf("  refused %lld: %s\n", static_cast<long long>(count), reason.c_str());
  }
  // Most random modules are plain kernels the GPU backend compiles.
  EXPECT_GT(ran, refused);
}

INSTANTIATE_TEST_SUITE_P(Shards, GpuSimRandomModuleTest, ::testing::Range(0, kShards));

}  // namespace
}  // namespace xlens::runtime
