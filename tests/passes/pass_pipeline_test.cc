#include "compiler/passes/pass_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/passes/dce.h"
#include "compiler/passes/instrumentation.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xlens::testing::ParseModuleOrDie;

constexpr const char* kModule = R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  dead = f32[4] negate(p)
  ROOT n = f32[4] abs(p)
})";

// Changes the module every time it runs (renames the root), to exercise the fixed point.
class AlwaysChanges : public HloPass {
 public:
  std::string_view name() const override { return "always-changes"; }
  StatusOr<bool> Run(HloModule& module) override {
    HloInstruction* root = module.entry_computation()->root_instruction();
    root->set_name(root->name() + "x");
    return true;
  }
};

// Changes the module but says it did not.
class LiesAboutChange : public HloPass {
 public:
  std::string_view name() const override { return "lies-about-change"; }
  StatusOr<bool> Run(HloModule& module) override {
    module.entry_computation()->root_instruction()->set_name("renamed");
    return false;
  }
};

// Breaks the module (a shape that disagrees with its operands).
class BreaksModule : public HloPass {
 public:
  std::string_view name() const override { return "breaks-module"; }
  StatusOr<bool> Run(HloModule& module) override {
    module.entry_computation()->root_instruction()->set_shape(Shape(PrimitiveType::F32, {5}));
    return true;
  }
};

class Fails : public HloPass {
 public:
  std::string_view name() const override { return "fails"; }
  StatusOr<bool> Run(HloModule& module) override { return Error("cannot do that"); }
};

TEST(PassPipelineTest, RunsPassesInOrderWithStepsAndTimes) {
  auto module = ParseModuleOrDie(kModule);
  HloPassPipeline pipeline("optimization");
  pipeline.AddPass<HloDce>();
  pipeline.AddPass<HloDce>();
  PassRecorder recorder;
  PipelineContext context;
  context.instrumentation = {&recorder};
  auto changed = pipeline.Run(*module, context);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(recorder.events().size(), 2u);
  EXPECT_EQ(recorder.events()[0].pass, "dce");
  EXPECT_EQ(recorder.events()[0].pipeline, "optimization");
  EXPECT_EQ(recorder.events()[0].step, 0);
  EXPECT_TRUE(recorder.events()[0].changed);
  EXPECT_EQ(recorder.events()[1].step, 1);
  EXPECT_FALSE(recorder.events()[1].changed);
  EXPECT_GE(recorder.events()[0].wall_ns, 0);
}

TEST(PassPipelineTest, FixedPointStopsWhenNothingChangesAndReportsTheCap) {
  auto module = ParseModuleOrDie(kModule);
  auto inner = std::make_unique<HloPassPipeline>("simplification");
  inner->AddPass<HloDce>();
  HloPassFix fix(std::move(inner));
  PipelineContext context;
  ASSERT_TRUE(fix.Run(*module, context).ok());
  EXPECT_EQ(fix.iterations(), 2);
  EXPECT_FALSE(fix.cap_hit());
  EXPECT_TRUE(context.warnings.empty());

  auto looping = std::make_unique<HloPassPipeline>("loop");
  looping->AddPass<AlwaysChanges>();
  HloPassFix capped(std::move(looping), /*max_iterations=*/3);
  ASSERT_TRUE(capped.Run(*module, context).ok());
  EXPECT_TRUE(capped.cap_hit());
  EXPECT_EQ(capped.iterations(), 3);
  ASSERT_EQ(context.warnings.size(), 1u);
  EXPECT_THAT(context.warnings[0], HasSubstr("loop still changed the module after 3 iterations"));
}

TEST(PassPipelineTest, FilterDisablesOrSelectsPassesByName) {
  HloPassPipeline pipeline("p");
  pipeline.AddPass<HloDce>();
  pipeline.AddPass<AlwaysChanges>();
  EXPECT_THAT(pipeline.LeafPassNames(), ElementsAre("dce", "always-changes"));

  auto module = ParseModuleOrDie(kModule);
  PassRecorder recorder;
  PipelineContext context;
  context.instrumentation = {&recorder};
  context.filter.disabled = {"always-changes"};
  ASSERT_TRUE(pipeline.Run(*module, context).ok());
  ASSERT_EQ(recorder.events().size(), 1u);
  EXPECT_EQ(recorder.events()[0].pass, "dce");

  PassRecorder only;
  PipelineContext only_context;
  only_context.instrumentation = {&only};
  only_context.filter.enabled_only = {"always-changes"};
  ASSERT_TRUE(pipeline.Run(*module, only_context).ok());
  ASSERT_EQ(only.events().size(), 1u);
  EXPECT_EQ(only.events()[0].pass, "always-changes");
}

TEST(PassPipelineTest, ChangeCheckCatchesAPassThatHidesItsChange) {
  auto module = ParseModuleOrDie(kModule);
  HloPassPipeline pipeline("p");
  pipeline.AddPass<LiesAboutChange>();
  ChangeCheckInstrumentation check;
  PipelineContext context;
  context.instrumentation = {&check};
  auto result = pipeline.Run(*module, context);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("pass lies-about-change (pipeline p) reported no change but changed the module"));
}

TEST(PassPipelineTest, VerifierNamesThePassThatBrokeTheModule) {
  auto module = ParseModuleOrDie(kModule);
  HloPassPipeline pipeline("p");
  pipeline.AddPass<BreaksModule>();
  VerifierInstrumentation verifier;
  PipelineContext context;
  context.instrumentation = {&verifier};
  auto result = pipeline.Run(*module, context);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("fails verification after pass breaks-module"));
}

TEST(PassPipelineTest, APassErrorNamesThePassAndReachesTheInstruments) {
  struct FailureRecorder : PassInstrumentation {
    std::string failed;
    void PassFailed(const HloModule&, const PassEvent& event, const Status&) override {
      failed = event.pass;
    }
  } recorder;
  auto module = ParseModuleOrDie(kModule);
  HloPassPipeline pipeline("p");
  pipeline.AddPass<Fails>();
  PipelineContext context;
  context.instrumentation = {&recorder};
  auto result = pipeline.Run(*module, context);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("pass fails (pipeline p): cannot do that"));
  EXPECT_EQ(recorder.failed, "fails");
}

}  // namespace
}  // namespace xlens
