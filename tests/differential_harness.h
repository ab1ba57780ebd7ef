// What the differential tests share (a backend's results against the reference evaluator's):
// corpus modules loaded with their pseudo-random inputs, the random modules of a run split in
// shards, and the loop that compiles, runs and compares each random module, counting the modules
// a backend refuses by name. Used by tests/runtime/cpu_compiler_corpus_test,
// tests/codegen/random_module_test and tests/runtime/gpu_sim_differential_test.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/random_module_generator.h"
#include "compiler/hlo/bounded_dynamic_shapes.h"
#include "compiler/hlo/elided_constants.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "test_util.h"

namespace xlens::testing {

// The random modules of a run: 2,000 from a fixed seed, in 8 shards (one test each);
// XLENS_RANDOM_MODULES=N runs N instead, XLENS_RANDOM_SEED=S another sequence.
inline constexpr int kRandomModuleShards = 8;

inline int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtoll(value, nullptr, 10) : fallback;
}
inline int64_t RandomModuleCount() { return EnvOr("XLENS_RANDOM_MODULES", 2000); }
inline uint64_t RandomModuleSeed() { return static_cast<uint64_t>(EnvOr("XLENS_RANDOM_SEED", 20261122)); }
// How many of the run's modules `shard` checks.
inline int64_t RandomModulesInShard(int shard) {
  return (RandomModuleCount() - shard + kRandomModuleShards - 1) / kRandomModuleShards;
}

// Rough operation count of evaluating the module once (loops counted once): elements, times the
// window or the contracted length for convolutions and dots. The evaluator is an interpreter
// (about 1e8 simple operations a second), so tests leave out modules above their budget.
inline double EvaluatorWork(const HloModule& module) {
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

// A module with the arguments it is run on.
struct DifferentialCase {
  std::unique_ptr<HloModule> module;
  std::vector<Literal> arguments;
};

// Pseudo-random arguments for the entry computation's parameters, drawn from `rng` in order.
inline StatusOr<std::vector<Literal>> RandomArguments(const HloModule& module, std::mt19937_64& rng) {
  std::vector<Literal> arguments;
  for (const HloInstruction* p : module.entry_computation()->parameter_instructions()) {
    ASSIGN_OR_RETURN(Literal literal, MakeRandomLiteral(p->shape(), rng));
    arguments.push_back(std::move(literal));
  }
  return arguments;
}

// The corpus module `name`, verified and made runnable as `xlens run` makes it: elided constants
// (`{...}`) filled with seeded random values, bounded dynamic dimensions static at their bounds.
// The error is the reason it cannot be: no corpus, does not verify, or cannot be made runnable.
inline StatusOr<std::unique_ptr<HloModule>> LoadCorpusModule(const std::string& name) {
  const std::string dir = HloCorpusDir();
  if (dir.empty()) return Error(std::string("corpus absent under ") + XLENS_SHARED_DIR);
  const std::string path = dir + "/" + name + ".hlo";
  auto module = ParseHloModule(ReadTestFile(path), ParseOptions{.verify = true, .filename = path});
  if (!module.ok()) return Error("does not verify: " + module.status().message());
  if (auto filled = FillElidedConstants(**module, ElidedConstantFill::kRandom, 0x5eed); !filled.ok()) {
    return Error("cannot fill its elided constants: " + filled.status().message());
  }
  if (auto made = RunBoundedDynamicShapesAtTheirBounds(**module); !made.ok()) {
    return Error("cannot run at its bounds: " + made.status().message());
  }
  return module;
}

// LoadCorpusModule's module with arguments from the seed every corpus test uses. The error is the
// reason to skip it: LoadCorpusModule's, more evaluator work than `max_evaluator_work`, or no
// random input for a parameter.
inline StatusOr<DifferentialCase> LoadCorpusCase(const std::string& name, double max_evaluator_work) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module, LoadCorpusModule(name));
  if (double work = EvaluatorWork(*module); work > max_evaluator_work) {
    return Error(fmt::format("too large for the reference evaluator here: about {:.0f} operations", work));
  }
  std::mt19937_64 rng(0x5eed);
  auto arguments = RandomArguments(*module, rng);
  if (!arguments.ok()) return Error("no random input: " + arguments.status().message());
  return DifferentialCase{std::move(module), std::move(*arguments)};
}

// What a backend did with the random modules of one shard.
struct ShardCounts {
  int64_t agreed = 0;   // compiled, ran and agreed with the evaluator
  int64_t refused = 0;  // refused by name at compile time
};

// For each random module of `shard`: generates and parses it, evaluates it, compiles it with
// `compile` (a StatusOr<std::unique_ptr<E>> where E has Execute(arguments)), runs it and compares
// within `tolerance`. A compile error for which `is_named_refusal` says yes is counted as a
// refusal; any other (or any, when `is_named_refusal` is empty) is a fatal failure, as are an
// invalid module, an evaluator or run error and a disagreement: the first one ends the shard.
// Call it under ASSERT_NO_FATAL_FAILURE.
template <typename Compile>
void CompareRandomModuleShard(int shard, const ErrorSpec& tolerance, Compile compile,
                              const std::function<bool(const std::string&)>& is_named_refusal,
                              ShardCounts* counts) {
  const int64_t total = RandomModuleCount();
  const uint64_t seed = RandomModuleSeed();
  for (int64_t id = shard; id < total; id += kRandomModuleShards) {
    RandomModuleGenerator generator(seed * 1000003 + id);
    const std::string text = generator.Generate(id);
    SCOPED_TRACE(text);
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "random"});
    ASSERT_TRUE(module.ok()) << "the generator made an invalid module: " << module.status().message();
    std::mt19937_64 rng(id);
    auto arguments = RandomArguments(**module, rng);
    ASSERT_TRUE(arguments.ok()) << arguments.status().message();
    auto expected = EvaluateModule(**module, *arguments);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    auto executable = compile(std::move(*module));
    if (!executable.ok()) {
      ASSERT_TRUE(is_named_refusal && is_named_refusal(executable.status().message()))
          << "module " << id << ": " << executable.status().message();
      ++counts->refused;
      continue;
    }
    auto actual = (*executable)->Execute(*arguments);
    ASSERT_TRUE(actual.ok()) << "module " << id << ": " << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, tolerance);
    ASSERT_TRUE(match.ok()) << "module " << id << ": " << match.message();
    ++counts->agreed;
  }
}

}  // namespace xlens::testing
