#include "compiler/passes/hlo_optimizer.h"

#include <filesystem>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dump/manifest.h"
#include "fusion_test_util.h"
#include "pass_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using xlens::testing::CloneModule;
using xlens::testing::EvaluatorCorpusModules;
using xlens::testing::HloCorpusDir;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::ReadTestFile;

// Evaluates the module after every pass on fixed inputs and compares with the result before the
// pipeline: a pass that changes what the module computes is named at once.
class SemanticsCheck : public PassInstrumentation {
 public:
  SemanticsCheck(std::vector<Literal> args, Literal expected)
      : args_(std::move(args)), expected_(std::move(expected)) {}

  Status AfterPass(const HloModule& module, const PassEvent& event) override {
    if (!event.changed) return OkStatus();
    auto actual = EvaluateModule(module, args_);
    if (!actual.ok()) {
      return Error("after " + event.pass + ": the module no longer evaluates: " +
                   actual.status().message());
    }
    // Reassociated float math (reductions regrouped by fusion) differs in the last bits.
    Status near = ExpectLiteralNear(expected_, *actual, ErrorSpec{1e-3, 1e-3});
    if (!near.ok()) return Error("after " + event.pass + ": " + near.message());
    ++checked_;
    return OkStatus();
  }
  int checked() const { return checked_; }

 private:
  std::vector<Literal> args_;
  Literal expected_;
  int checked_ = 0;
};

// Runs the stage pipelines of `backend` like OptimizeHloModule, with `extra` instruments.
Status RunPipelineWith(HloModule& module, Backend backend, PassInstrumentation* extra) {
  auto pipeline = MakeHloPipeline(backend);
  VerifierInstrumentation verifier;
  ChangeCheckInstrumentation change_check;
  PipelineContext context;
  context.instrumentation = {&verifier, &change_check, extra};
  for (const auto& stage : pipeline->passes()) {
    RETURN_IF_ERROR(static_cast<HloPassPipeline*>(stage.get())->Run(module, context).status());
  }
  return OkStatus();
}

TEST(HloOptimizerTest, EveryPassOfBothPipelinesPreservesTheCorpusResults) {
  if (HloCorpusDir().empty()) GTEST_SKIP() << "../shared/corpus/hlo is not beside the clone";
  int modules = 0, checks = 0;
  for (Backend backend : {Backend::kCpu, Backend::kGpu}) {
    for (const std::string& name : EvaluatorCorpusModules()) {
      SCOPED_TRACE(std::string(BackendName(backend)) + " " + name);
      auto parsed = ParseHloModule(ReadTestFile(HloCorpusDir() + "/" + name + ".hlo"));
      ASSERT_TRUE(parsed.ok()) << parsed.status().message();
      HloModule& module = **parsed;
      std::mt19937_64 rng(11);
      std::vector<Literal> args;
      for (const HloInstruction* p : module.entry_computation()->parameter_instructions()) {
        auto lit = MakeRandomLiteral(p->shape(), rng);
        ASSERT_TRUE(lit.ok());
        args.push_back(std::move(*lit));
      }
      auto expected = EvaluateModule(module, args);
      if (!expected.ok()) continue;  // an opcode the evaluator refuses: nothing to compare
      SemanticsCheck check(std::move(args), std::move(*expected));
      Status status = RunPipelineWith(module, backend, &check);
      EXPECT_TRUE(status.ok()) << status.message();
      ++modules;
      checks += check.checked();
    }
  }
  EXPECT_GE(modules, 2 * 40);
  EXPECT_GT(checks, modules) << "the passes changed almost nothing: the check checked nothing";
}

TEST(HloOptimizerTest, TheExpectedKernelCounts) {
  for (Backend backend : {Backend::kCpu, Backend::kGpu}) {
    SCOPED_TRACE(BackendName(backend));
    auto reduce_sum = ParseModuleOrDie(xlens::testing::kReduceSumModule);
    auto result = OptimizeHloModule(*reduce_sum, OptimizeOptions{.backend = backend});
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->kernels_after, 1);
    const HloInstruction* root = reduce_sum->entry_computation()->root_instruction();
    ASSERT_EQ(root->opcode(), HloOpcode::kFusion);
    EXPECT_EQ(root->fusion_kind, FusionKind::kInput);

    auto softmax = ParseModuleOrDie(xlens::testing::SoftmaxModule(4096, 1000));
    result = OptimizeHloModule(*softmax, OptimizeOptions{.backend = backend});
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_LE(result->kernels_after, 2);

    auto layer_norm = ParseModuleOrDie(xlens::testing::LayerNormModule(4096, 1024));
    result = OptimizeHloModule(*layer_norm, OptimizeOptions{.backend = backend});
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_LE(result->kernels_after, 2);
  }
}

TEST(HloOptimizerTest, PassFlagsSelectPassesAndUnknownNamesAreErrors) {
  auto module = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  OptimizeOptions options;
  options.filter.disabled = {"fusion", "multi-output-fusion"};
  auto result = OptimizeHloModule(*module, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->kernels_after, result->kernels_before);
  for (const PassEvent& e : result->events) EXPECT_NE(e.pass, "fusion");

  auto only = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  result = OptimizeHloModule(*only, OptimizeOptions{.only_passes = {"fusion", "dce"}});
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->events.size(), 2u);
  EXPECT_EQ(result->events[0].pass, "fusion");
  EXPECT_EQ(result->kernels_after, 1);

  Status unknown = CheckPassNames({"fusoin"}, "--xla_disable_hlo_passes");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.message(), HasSubstr("unknown pass 'fusoin'; did you mean 'fusion'?"));
  EXPECT_THAT(unknown.message(), HasSubstr("algebraic-simplifier"));

  // Pass names and opcodes come from XLA_FLAGS or a flags file: they reach the message escaped
  // and, when long, cut.
  Status escaped = CheckPassNames({"cse\x1b[2J" + std::string(5000, 'x')}, "--xla_disable_hlo_passes");
  EXPECT_THAT(escaped.message(), HasSubstr("unknown pass 'cse\\x1b[2Jxxx"));
  EXPECT_LT(escaped.message().size(), 1000u);
  StatusOr<ReducePrecisionConfig> precision = ParseReducePrecisionFlag("5,10:add,\x07" "bad");
  ASSERT_FALSE(precision.ok());
  EXPECT_THAT(precision.status().message(),
              HasSubstr("--xla_reduce_precision=5,10:add,\\x07bad: '\\x07bad' is not an opcode"));
}

TEST(HloOptimizerTest, DumpsEveryChangedPassWithXlaNamesAndTheManifestListsThemAll) {
  if (HloCorpusDir().empty()) GTEST_SKIP() << "../shared/corpus/hlo is not beside the clone";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xlens_dump_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  DebugOptions flags;
  flags.xla_dump_to = dir.string();
  flags.xla_dump_hlo_as_text = true;
  flags.xla_dump_hlo_as_dot = true;
  flags.xla_dump_hlo_pass_re = ".*";
  auto module = ParseModuleOrDie(ReadTestFile(HloCorpusDir() + "/reduce_to_vector_and_scalar.hlo"));
  {
    DumpContext dump(flags);
    auto result = OptimizeHloModule(*module, OptimizeOptions{.dump = &dump});
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_TRUE(dump.warnings().empty());
  }
  const std::string name = "HandleReductionToVectorAndOtherReduction";
  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(dir)) on_disk.insert(entry.path().filename());
  for (const char* expected : {".before_optimizations.txt", ".before_optimizations.dot",
                               ".cpu_after_optimizations.txt", ".cpu_after_optimizations.dot",
                               ".cpu_after_optimizations-buffer-assignment.txt"}) {
    EXPECT_TRUE(on_disk.count("module_0001." + name + expected)) << expected;
  }
  std::regex between(R"(module_0001\.)" + name +
                     R"(\.(\d{4})\.([a-z-]+)\.after_([a-z-]+)\.before_([a-z-]+)\.(txt|dot))");
  int between_files = 0;
  bool fusion_dumped = false;
  for (const std::string& file : on_disk) {
    std::smatch m;
    if (!std::regex_match(file, m, between)) continue;
    ++between_files;
    fusion_dumped |= m[3] == "fusion";
  }
  EXPECT_GE(between_files, 6);
  EXPECT_TRUE(fusion_dumped) << "the dump after the fusion pass is missing";

  auto manifest = ReadManifest((dir / "manifest.json").string());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules.size(), 1u);
  const ManifestModule& m = manifest->modules[0];
  std::set<std::string> listed(m.files.begin(), m.files.end());
  bool fusion_stage = false;
  for (const ManifestStage& stage : m.stages) {
    listed.insert(stage.files.begin(), stage.files.end());
    fusion_stage |= stage.pass == "fusion" && stage.changed;
  }
  EXPECT_TRUE(fusion_stage);
  std::set<std::string> dumped = on_disk;
  dumped.erase("manifest.json");
  EXPECT_EQ(listed, dumped) << "manifest.json must list every dumped file";
  ASSERT_EQ(m.kernels.size(), 2u);
  for (const ManifestKernel& k : m.kernels) {
    EXPECT_EQ(k.fusion_kind, "kInput");
    EXPECT_FALSE(k.fusion_computation.empty());
    EXPECT_EQ(k.created_by_pass, "fusion");
  }

  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    for (const std::string& file : dumped) {
      if (fs::path(file).extension() != ".dot") continue;
      std::string command = "dot -Tsvg '" + (dir / file).string() + "' -o /dev/null 2>&1";
      EXPECT_EQ(std::system(command.c_str()), 0) << file << " does not render";
    }
  }
  fs::remove_all(dir);
}

TEST(HloOptimizerTest, KernelsInTheManifestListTheOpNamesTheyHold) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xlens_kernels_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  DebugOptions flags;
  flags.xla_dump_to = dir.string();
  auto module = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  {
    DumpContext dump(flags);
    ASSERT_TRUE(OptimizeHloModule(*module, OptimizeOptions{.dump = &dump}).ok());
  }
  auto manifest = ReadManifest((dir / "manifest.json").string());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->modules.at(0).kernels.size(), 1u);
  const ManifestKernel& kernel = manifest->modules[0].kernels[0];
  EXPECT_EQ(kernel.fusion_kind, "kInput");
  EXPECT_EQ(kernel.created_by_pass, "fusion");
  // Every graph op inside the kernel, not just the root's (XLA keeps one).
  std::vector<std::string> op_names;
  for (const HloInstruction* i : module->entry_computation()->root_instruction()
                                     ->fused_computation()->instructions()) {
    if (!i->metadata.op_name.empty()) op_names.push_back(i->metadata.op_name);
  }
  ASSERT_GE(op_names.size(), 2u);
  EXPECT_THAT(kernel.op_names, ::testing::UnorderedElementsAreArray(op_names));
  fs::remove_all(dir);
}

// A module jaxlib dumped, with its stack-frame table: each kernel of the manifest has the line of
// the Python that made it and the callers above, outermost last.
TEST(HloOptimizerTest, KernelsInTheManifestHaveTheirSourceLineAndCallers) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xlens_kernel_source_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  DebugOptions flags;
  flags.xla_dump_to = dir.string();
  auto module = ParseModuleOrDie(ReadTestFile(std::string(XLENS_SOURCE_DIR) + "/tests/hlo/testdata/jax_train_step.hlo"));
  {
    DumpContext dump(flags);
    ASSERT_TRUE(OptimizeHloModule(*module, OptimizeOptions{.dump = &dump}).ok());
  }
  auto manifest = ReadManifest((dir / "manifest.json").string());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_FALSE(manifest->modules.at(0).kernels.empty());
  bool predict = false;
  for (const ManifestKernel& kernel : manifest->modules[0].kernels) {
    ASSERT_TRUE(kernel.source.has_value()) << kernel.name;
    EXPECT_EQ(kernel.source->file, "train_step.py") << kernel.name;
    ASSERT_FALSE(kernel.stack.empty()) << kernel.name;
    EXPECT_EQ(kernel.stack.back().function, "<module>") << kernel.name;
    EXPECT_EQ(kernel.stack.back().line, 14) << kernel.name;
    if (kernel.source->line == 4) {
      // predict's matmul (line 4, column 18), called from loss and train_step.
      predict = true;
      EXPECT_EQ(kernel.source->function, "predict");
      EXPECT_EQ(kernel.source->column, 18);
      ASSERT_EQ(kernel.stack.size(), 3u);
      EXPECT_EQ(kernel.stack[0].function, "loss");
      EXPECT_EQ(kernel.stack[0].line, 7);
      EXPECT_EQ(kernel.stack[1].function, "train_step");
    }
  }
  EXPECT_TRUE(predict);
  fs::remove_all(dir);
}

TEST(HloOptimizerTest, ReducePrecisionIsControlledByItsFlag) {
  auto config = ParseReducePrecisionFlag("5,10:multiply");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->exponent_bits, 5);
  EXPECT_EQ(config->mantissa_bits, 10);
  EXPECT_EQ(config->opcodes, std::set<HloOpcode>{HloOpcode::kMultiply});
  for (const char* bad : {"5", "a,10", "5,10:mul", "0,10", "5,99"}) {
    EXPECT_FALSE(ParseReducePrecisionFlag(bad).ok()) << bad;
  }
  EXPECT_THAT(ParseReducePrecisionFlag("5,10:mul").status().message(),
              HasSubstr("'mul' is not an opcode"));

  auto off = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  ASSERT_TRUE(OptimizeHloModule(*off, OptimizeOptions{}).ok());
  auto on = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  auto before = CloneModule(*on);
  ASSERT_TRUE(OptimizeHloModule(*on, OptimizeOptions{.reduce_precision = *config}).ok());
  auto count = [](const HloModule& m) {
    int64_t n = 0;
    for (const HloComputation* c : m.computations()) {
      for (const HloInstruction* i : c->instructions()) n += i->opcode() == HloOpcode::kReducePrecision;
    }
    return n;
  };
  EXPECT_EQ(count(*off), 0);
  EXPECT_EQ(count(*on), 1) << "one multiply, one reduce-precision after it";
  // f16 rounding of the product changes the sum a little, not a lot.
  EXPECT_TRUE(xlens::testing::SameResults(*before, *on, 1, ErrorSpec{1e-2, 1e-2}));
}

TEST(HloOptimizerTest, AnUnwritableDumpDirectoryIsAWarningNotAFailure) {
  DebugOptions flags;
  flags.xla_dump_to = "/proc/xlens-cannot-write-here";
  flags.xla_dump_hlo_as_text = true;
  DumpContext dump(flags);
  auto module = ParseModuleOrDie(xlens::testing::kReduceSumModule);
  auto result = OptimizeHloModule(*module, OptimizeOptions{.dump = &dump});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->kernels_after, 1);
  ASSERT_FALSE(result->warnings.empty());
  EXPECT_THAT(result->warnings[0], HasSubstr("/proc/xlens-cannot-write-here"));
}

}  // namespace
}  // namespace xlens
