#include "compiler/passes/dump_instrumentation.h"

#include <stdlib.h>

#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/passes/algebraic_simplifier.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/instruction_fusion.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using xlens::testing::ParseModuleOrDie;

class DumpInstrumentationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "xlens_dump_instrumentation_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `pipeline` on `module` with the dump instrument writing into the test's directory, and
  // returns the module's record as manifest.json has it.
  ManifestModule RunAndReadManifest(HloPassPipeline& pipeline, HloModule& module,
                                    const std::string& pass_re = "") {
    DebugOptions flags;
    flags.xla_dump_to = dir_;
    flags.xla_dump_hlo_pass_re = pass_re;
    {
      DumpContext dump(flags);
      DumpInstrumentation dumper(dump);
      PipelineContext context;
      context.instrumentation.push_back(&dumper);
      StatusOr<bool> ran = pipeline.Run(module, context);
      EXPECT_TRUE(ran.ok()) << ran.status().message();
      dump.EndModule(module);
    }
    auto manifest = ReadManifest((fs::path(dir_) / "manifest.json").string());
    EXPECT_TRUE(manifest.ok()) << manifest.status().message();
    if (!manifest.ok() || manifest->modules.size() != 1) {
      ADD_FAILURE() << "expected one module in the manifest";
      return {};
    }
    return manifest->modules[0];
  }

  static const ManifestStage* FindStage(const ManifestModule& module, const std::string& pass) {
    for (const ManifestStage& stage : module.stages) {
      if (stage.pass == pass) return &stage;
    }
    return nullptr;
  }

  std::string dir_;
};

// multiply and add fuse into one loop fusion; the tuple that used the add now uses the fusion.
TEST_F(DumpInstrumentationTest, TheFusionStageRecordsWhatWentIntoWhichFusion) {
  auto module = ParseModuleOrDie(R"(HloModule fuse_two
ENTRY main {
  p0 = f32[1024] parameter(0)
  p1 = f32[1024] parameter(1)
  a = f32[1024] multiply(p0, p1)
  b = f32[1024] add(a, p0)
  ROOT t = (f32[1024]) tuple(b)
})");
  ASSERT_NE(module, nullptr);
  HloPassPipeline pipeline("fusion");
  pipeline.AddPass<InstructionFusion>(FusionBackend::kCpu);
  ManifestModule recorded = RunAndReadManifest(pipeline, *module);

  std::vector<const HloInstruction*> fusions;
  for (const HloInstruction* i : module->entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kFusion) fusions.push_back(i);
  }
  ASSERT_EQ(fusions.size(), 1u) << module->ToString();
  const std::string fusion = fusions[0]->name();

  const ManifestStage* stage = FindStage(recorded, "fusion");
  ASSERT_NE(stage, nullptr);
  EXPECT_TRUE(stage->changed);
  EXPECT_THAT(stage->changes.fused_into, UnorderedElementsAre(Pair("a", fusion), Pair("b", fusion)));
  EXPECT_THAT(stage->changes.added, ElementsAre(fusion));
  EXPECT_THAT(stage->changes.removed, IsEmpty());
  EXPECT_THAT(stage->changes.modified, ElementsAre("t"));

  // The pass's decisions, under the step of its stage: a fused into b, making the fusion.
  ASSERT_FALSE(recorded.fusion_decisions.empty());
  bool a_into_b = false;
  for (const ManifestFusionDecision& d : recorded.fusion_decisions) {
    EXPECT_EQ(d.step, stage->step);
    EXPECT_EQ(d.pass, "fusion");
    if (d.producer == "a" && d.consumer == "b" && d.fused) {
      a_into_b = true;
      EXPECT_EQ(d.kind, "kLoop");
      EXPECT_EQ(d.fusion, fusion);
    }
  }
  EXPECT_TRUE(a_into_b);
}

// x * 1 is x: the simplifier rewires the negate to the parameter (modified), and what is left dead
// goes (removed), by the simplifier or by dce; the nested pipeline's own stage records the sum.
TEST_F(DumpInstrumentationTest, SimplifierAndDceStagesRecordRemovedAndModified) {
  auto module = ParseModuleOrDie(R"(HloModule simplify
ENTRY main {
  p0 = f32[8] parameter(0)
  one = f32[] constant(1)
  ones = f32[8] broadcast(one), dimensions={}
  x = f32[8] multiply(p0, ones)
  ROOT n = f32[8] negate(x)
})");
  ASSERT_NE(module, nullptr);
  HloPassPipeline outer("optimization");
  auto& simplification = outer.AddPass<HloPassPipeline>("simplification");
  simplification.AddPass<AlgebraicSimplifier>();
  simplification.AddPass<HloDce>();
  ManifestModule recorded = RunAndReadManifest(outer, *module, ".*");

  const ManifestStage* simplifier = FindStage(recorded, "algebraic-simplifier");
  const ManifestStage* dce = FindStage(recorded, "dce");
  const ManifestStage* nested = FindStage(recorded, "simplification");
  ASSERT_NE(simplifier, nullptr);
  ASSERT_NE(dce, nullptr);
  ASSERT_NE(nested, nullptr);
  ASSERT_TRUE(simplifier->changed);
  EXPECT_THAT(simplifier->changes.modified, ElementsAre("n"));
  EXPECT_THAT(simplifier->changes.added, IsEmpty());
  EXPECT_THAT(simplifier->changes.fused_into, IsEmpty());
  // Whatever the simplifier left dead, dce removed; together they removed all three.
  std::vector<std::string> removed = simplifier->changes.removed;
  if (dce->changed) {
    removed.insert(removed.end(), dce->changes.removed.begin(), dce->changes.removed.end());
    EXPECT_THAT(dce->changes.modified, IsEmpty());
  } else {
    EXPECT_TRUE(dce->changes.empty());
  }
  EXPECT_THAT(removed, UnorderedElementsAre("one", "ones", "x"));

  EXPECT_EQ(nested->pipeline, "optimization");
  EXPECT_TRUE(nested->changed);
  EXPECT_THAT(nested->changes.removed, ElementsAre("one", "ones", "x"));
  EXPECT_THAT(nested->changes.modified, ElementsAre("n"));
  // The stages that changed nothing (none here but the pseudo stages) carry no record.
  for (const ManifestStage& stage : recorded.stages) {
    if (!stage.changed) {
      EXPECT_TRUE(stage.changes.empty()) << stage.pass;
    }
  }
  EXPECT_TRUE(recorded.fusion_decisions.empty());
}

// Nothing is recorded (nor computed) where no manifest is written.
TEST_F(DumpInstrumentationTest, OnlyAModuleWithAManifestIsRecorded) {
  auto module = ParseModuleOrDie("HloModule m\nENTRY e {\n  ROOT p = f32[4] parameter(0)\n}\n");
  ASSERT_NE(module, nullptr);
  DebugOptions to_dir;
  to_dir.xla_dump_to = dir_;
  EXPECT_TRUE(DumpContext(to_dir).RecordsManifest(*module));
  DebugOptions to_stdout;
  to_stdout.xla_dump_to = "-";
  std::ostringstream out;
  EXPECT_FALSE(DumpContext(to_stdout, DumpContextOptions{.stdout_stream = &out, .fixed_timestamp_us = {}}).RecordsManifest(*module));
  EXPECT_FALSE(DumpContext(DebugOptions{}).RecordsManifest(*module));
  DebugOptions other_modules = to_dir;
  other_modules.xla_dump_hlo_module_re = "^other$";
  EXPECT_FALSE(DumpContext(other_modules).RecordsManifest(*module));
}

}  // namespace
}  // namespace xlens
