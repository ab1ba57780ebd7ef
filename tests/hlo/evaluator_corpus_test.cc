// The reference evaluator on real XLA modules from the shared corpus, on deterministic
// pseudo-random inputs: each module evaluates, or fails with an error that names the opcode it
// does not support.
#include "compiler/hlo/evaluator.h"

#include <filesystem>
#include <random>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "evaluator_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using xlens::testing::Values;

std::string CorpusPath(const std::string& name) {
  return std::string(XLENS_SHARED_DIR) + "/corpus/hlo/" + name + ".hlo";
}

// Small values: integer parameters often index, count loop trips or select branches.
Literal RandomLiteral(const Shape& shape, std::mt19937_64& rng) {
  if (shape.IsTuple()) {
    std::vector<Literal> elements;
    for (const Shape& element : shape.tuple_shapes()) elements.push_back(RandomLiteral(element, rng));
    return Literal::MakeTuple(std::move(elements));
  }
  Literal literal(shape);
  const PrimitiveType type = shape.element_type();
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  for (int64_t i = 0; i < literal.element_count(); ++i) {
    if (type == PrimitiveType::PRED) {
      literal.SetFromInt64(i, static_cast<int64_t>(rng() & 1));
    } else if (IsIntegralType(type)) {
      literal.SetFromInt64(i, static_cast<int64_t>(rng() % 8));
    } else if (IsComplexType(type)) {
      literal.SetFromComplex(i, complex128(real(rng), real(rng)));
    } else {
      literal.SetFromDouble(i, real(rng));
    }
  }
  return literal;
}

// Opcodes in `module` that the evaluator refuses.
std::set<std::string> RefusedOpcodes(const HloModule& module) {
  std::set<std::string> refused;
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      const HloOpcode opcode = instruction->opcode();
      if (!IsFullySupportedOpcode(opcode) || opcode == HloOpcode::kCustomCall ||
          opcode == HloOpcode::kAllReduce || opcode == HloOpcode::kRngBitGenerator) {
        refused.insert(std::string(HloOpcodeString(opcode)));
      }
    }
  }
  return refused;
}

class EvaluatorCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EvaluatorCorpusTest, EvaluatesOrNamesTheUnsupportedOpcode) {
  const std::string path = CorpusPath(GetParam());
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus file absent: " << path;
  auto module = ParseHloModule(xlens::testing::ReadTestFile(path),
                               ParseOptions{.verify = true, .filename = path});
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloComputation* entry = (*module)->entry_computation();
  std::mt19937_64 rng(0x5eed);
  std::vector<Literal> arguments;
  for (const HloInstruction* parameter : entry->parameter_instructions()) {
    arguments.push_back(RandomLiteral(parameter->shape(), rng));
  }
  StatusOr<Literal> result = EvaluateModule(**module, arguments);
  const std::set<std::string> refused = RefusedOpcodes(**module);
  if (result.ok()) {
    EXPECT_TRUE(shape_util::Compatible(result->shape(), entry->root_instruction()->shape()));
    return;
  }
  const std::string message = result.status().message();
  bool names_refused_opcode = false;
  for (const std::string& opcode : refused) {
    if (message.find("unsupported opcode " + opcode) != std::string::npos) {
      names_refused_opcode = true;
    }
  }
  EXPECT_TRUE(names_refused_opcode) << message;
}

INSTANTIATE_TEST_SUITE_P(Corpus, EvaluatorCorpusTest, ::testing::ValuesIn(xlens::testing::EvaluatorCorpusModules()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::string(info.param);
                         });

// A few corpus modules whose results are known by hand.
StatusOr<Literal> EvaluateCorpusModule(const std::string& name,
                                       const std::vector<Literal>& arguments = {}) {
  auto module = ParseHloModule(xlens::testing::ReadTestFile(CorpusPath(name)));
  if (!module.ok()) return module.status();
  return EvaluateModule(**module, arguments);
}

TEST(EvaluatorCorpusResultsTest, KnownResults) {
  if (!std::filesystem::exists(CorpusPath("while_scalar_s32"))) {
    GTEST_SKIP() << "corpus absent under " << XLENS_SHARED_DIR;
  }
  StatusOr<Literal> loop = EvaluateCorpusModule("while_scalar_s32");
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  EXPECT_THAT(Values<int32_t>(*loop), ElementsAre(5));

  StatusOr<Literal> branch = EvaluateCorpusModule("conditional_indexed_branches");
  ASSERT_TRUE(branch.ok()) << branch.status().message();
  EXPECT_THAT(Values<float>(*branch), ElementsAre(12));

  // fib35 over fib0 = 0 and fib1 = 1 is the 35th Fibonacci number, exact in f32.
  std::vector<Literal> inputs;
  inputs.push_back(xlens::testing::MakeLiteral<float>(PrimitiveType::F32, {5}, {0, 0, 0, 0, 0}));
  inputs.push_back(xlens::testing::MakeLiteral<float>(PrimitiveType::F32, {5}, {1, 1, 1, 1, 1}));
  StatusOr<Literal> fibonacci = EvaluateCorpusModule("fibonacci_add_chain", inputs);
  ASSERT_TRUE(fibonacci.ok()) << fibonacci.status().message();
  EXPECT_THAT(Values<float>(*fibonacci), ::testing::Each(9227465.0f));
}

}  // namespace
}  // namespace xlens
