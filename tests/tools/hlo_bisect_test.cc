#include "compiler/tools/hlo_bisect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// exp(2 * p0 + p1) and a reduction of it: after the CPU pipeline, a loop fusion and a reduce.
constexpr std::string_view kModule = R"(HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p0 = f32[8,4] parameter(0)
  p1 = f32[8,4] parameter(1)
  c = f32[] constant(2)
  b = f32[8,4] broadcast(c), dimensions={}
  m = f32[8,4] multiply(p0, b)
  a = f32[8,4] add(m, p1)
  e = f32[8,4] exponential(a)
  z = f32[] constant(0)
  r = f32[8] reduce(e, z), dimensions={1}, to_apply=sum
  ROOT t = (f32[8,4], f32[8]) tuple(e, r)
})";

struct Bisected {
  std::unique_ptr<HloModule> module;
  BisectResult result;
};

Bisected Bisect(const PlantedBugs& planted) {
  Bisected out;
  auto module = ParseHloModule(kModule);
  EXPECT_TRUE(module.ok()) << module.status().message();
  out.module = std::move(*module);
  auto args = RandomArguments(*out.module, 42);
  EXPECT_TRUE(args.ok());
  BisectOptions options;
  options.compile.optimize.planted = planted;
  auto result = BisectModule(*out.module, *args, options);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (result.ok()) out.result = std::move(*result);
  return out;
}

TEST(HloBisectTest, NamesThePlantedPassWhereverItIsPlanted) {
  // Early in the pipeline, inside the simplification fixed point, and after fusion.
  for (const char* after : {"call-inliner", "algebraic-simplifier", "fusion", "copy-insertion"}) {
    SCOPED_TRACE(after);
    Bisected b = Bisect(PlantedBugs{.miscompile_after_pass = after});
    EXPECT_EQ(b.result.kind, CulpritKind::kPass);
    EXPECT_EQ(b.result.pass, "planted-miscompile");
    // Where: the first output, off by exactly the planted 1.
    EXPECT_THAT(b.result.difference, HasSubstr("expected"));
    EXPECT_NEAR(b.result.errors.max_abs_error, 1.0, 1e-5);
    EXPECT_THAT(b.result.after_text, HasSubstr("add("));
    EXPECT_NE(b.result.before_text, b.result.after_text);
    EXPECT_EQ(b.result.compilations, 0) << "a pass culprit needs no compilation";
  }
}

TEST(HloBisectTest, AWrongKernelIsCodeGenerationInThatKernel) {
  auto clean = Bisect(PlantedBugs{});
  ASSERT_EQ(clean.result.kind, CulpritKind::kNone) << clean.result.summary;
  // The CPU pipeline makes one multi-output kernel, %fusion, of the whole module.
  Bisected b = Bisect(PlantedBugs{.miscompile_kernel = "fusion"});
  EXPECT_EQ(b.result.kind, CulpritKind::kCodegen) << b.result.summary;
  EXPECT_EQ(b.result.kernel, "fusion");
  EXPECT_THAT(b.result.kernel_difference, HasSubstr("output 0: "));
  EXPECT_THAT(b.result.kernel_text, HasSubstr("exponential"));
  EXPECT_THAT(b.result.summary, HasSubstr("code generation: kernel fusion"));
  // The smallest change that agrees: no kernel of that name. Either fusion pass alone would still
  // make one (the other does), so both are needed.
  EXPECT_THAT(b.result.disabled, ElementsAre("fusion", "multi-output-fusion"));
  EXPECT_THAT(b.result.before_text, ::testing::Not(HasSubstr("fusion(")));
  EXPECT_THAT(b.result.after_text, HasSubstr("fusion("));
}

TEST(HloBisectTest, AWrongKernelIsFoundDownstreamOfARightOne) {
  // Without multi-output fusion: %fusion.1 (elementwise) feeds %fusion (the reduce). A fault in
  // the reduce leaves %fusion.1 right, and the reduce is named, not what feeds it.
  PlantedBugs planted{.miscompile_kernel = "fusion"};
  auto module = ParseHloModule(kModule);
  ASSERT_TRUE(module.ok());
  auto args = RandomArguments(**module, 42);
  BisectOptions options;
  options.compile.optimize.planted = planted;
  options.compile.optimize.filter.disabled = {"multi-output-fusion"};
  auto result = BisectModule(**module, *args, options);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->kind, CulpritKind::kCodegen) << result->summary;
  EXPECT_EQ(result->kernel, "fusion");
  EXPECT_THAT(result->kernel_text, HasSubstr("reduce("));
  // Planted in the elementwise kernel instead, that one is named.
  options.compile.optimize.planted.miscompile_kernel = "fusion.1";
  result = BisectModule(**module, *args, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->kernel, "fusion.1");
  EXPECT_THAT(result->kernel_text, HasSubstr("exponential"));
  // Disabling fusion avoids it; of the fusion pass's decisions, the one that makes %fusion.1 is
  // the first after which the result departs (the fuel search).
  EXPECT_THAT(result->disabled, ElementsAre("fusion"));
  EXPECT_THAT(result->fusion_decision, HasSubstr("making %fusion.1"));
  EXPECT_GT(result->fusion_fuel, 0);
}

TEST(HloBisectTest, ACleanModuleIsNotReproduced) {
  Bisected b = Bisect(PlantedBugs{});
  EXPECT_EQ(b.result.kind, CulpritKind::kNone);
  EXPECT_THAT(b.result.summary, HasSubstr("not reproduced"));
}

}  // namespace
}  // namespace xlens::tools
