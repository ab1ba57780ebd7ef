#include "compiler/passes/stage_changes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using xlens::testing::ParseModuleOrDie;

ManifestStageChanges Compare(const char* before_text, const char* after_text) {
  auto before = ParseModuleOrDie(before_text);
  auto after = ParseModuleOrDie(after_text);
  if (before == nullptr || after == nullptr) return {};
  return CompareSnapshots(TakeModuleSnapshot(*before), TakeModuleSnapshot(*after));
}

TEST(StageChangesTest, AddedRemovedAndModifiedAreSortedByName) {
  ManifestStageChanges changes = Compare(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  zeta = f32[4] negate(p)
  alpha = f32[4] abs(p)
  ROOT r = f32[4] add(zeta, alpha)
})",
                                         R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  zeta = f32[4] negate(p)
  new.2 = f32[4] exponential(p)
  new.1 = f32[4] sine(p)
  ROOT r = f32[4] add(new.1, new.2)
})");
  EXPECT_THAT(changes.added, ElementsAre("new.1", "new.2"));
  EXPECT_THAT(changes.removed, ElementsAre("alpha"));
  EXPECT_THAT(changes.modified, ElementsAre("r"));
  EXPECT_THAT(changes.fused_into, IsEmpty());
}

// Only the ROOT marker moved: the instructions print the same without "ROOT ", so nothing changed.
TEST(StageChangesTest, TheRootMarkerAloneIsNoChange) {
  ManifestStageChanges changes = Compare(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] abs(p)
  ROOT n = f32[4] negate(p)
})",
                                         R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT a = f32[4] abs(p)
  n = f32[4] negate(p)
})");
  EXPECT_TRUE(changes.empty());
}

// An instruction that went into a fusion nested inside another is fused into the outer, top-level
// one; one that went nowhere is removed.
TEST(StageChangesTest, FusedIntoFollowsNestedFusionsToTheTopLevelOne) {
  ManifestStageChanges changes = Compare(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  x = f32[4] negate(p)
  y = f32[4] abs(x)
  gone = f32[4] sine(p)
  ROOT z = f32[4] exponential(y)
})",
                                         R"(HloModule m
inner {
  param_0.1 = f32[4] parameter(0)
  ROOT x = f32[4] negate(param_0.1)
}
outer {
  param_0 = f32[4] parameter(0)
  f.inner = f32[4] fusion(param_0), kind=kLoop, calls=inner
  y = f32[4] abs(f.inner)
  ROOT z = f32[4] exponential(y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT fusion.7 = f32[4] fusion(p), kind=kLoop, calls=outer
})");
  EXPECT_THAT(changes.added, ElementsAre("fusion.7"));
  EXPECT_THAT(changes.removed, ElementsAre("gone"));
  EXPECT_THAT(changes.modified, IsEmpty());
  EXPECT_THAT(changes.fused_into, UnorderedElementsAre(Pair("x", "fusion.7"), Pair("y", "fusion.7"),
                                                       Pair("z", "fusion.7")));
}

// A fusion whose nested fusion's body changed is modified, though its own body reads the same.
TEST(StageChangesTest, AFusionIsModifiedWhenANestedFusedComputationChanges) {
  const char* text = R"(HloModule m
inner {
  param_0.1 = f32[4] parameter(0)
  ROOT x = f32[4] OP(param_0.1)
}
outer {
  param_0 = f32[4] parameter(0)
  ROOT f.inner = f32[4] fusion(param_0), kind=kLoop, calls=inner
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT fusion.7 = f32[4] fusion(p), kind=kLoop, calls=outer
})";
  std::string before = text, after = text;
  before.replace(before.find("OP"), 2, "negate");
  after.replace(after.find("OP"), 2, "abs");
  ManifestStageChanges changes = Compare(before.c_str(), after.c_str());
  EXPECT_THAT(changes.modified, ElementsAre("fusion.7"));
  EXPECT_THAT(changes.added, IsEmpty());
  EXPECT_THAT(changes.removed, IsEmpty());
}

// A producer copied into two fusions is fused into the one whose name sorts first, whatever the
// order of the module.
TEST(StageChangesTest, ADuplicatedProducerIsFusedIntoTheSmallestName) {
  ManifestStageChanges changes = Compare(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  x = f32[4] negate(p)
  a = f32[4] abs(x)
  b = f32[4] sine(x)
  ROOT t = (f32[4], f32[4]) tuple(a, b)
})",
                                         R"(HloModule m
f9 {
  param_0 = f32[4] parameter(0)
  x = f32[4] negate(param_0)
  ROOT a = f32[4] abs(x)
}
f1 {
  param_0 = f32[4] parameter(0)
  x = f32[4] negate(param_0)
  ROOT b = f32[4] sine(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  fusion.9 = f32[4] fusion(p), kind=kLoop, calls=f9
  fusion.1 = f32[4] fusion(p), kind=kLoop, calls=f1
  ROOT t = (f32[4], f32[4]) tuple(fusion.9, fusion.1)
})");
  EXPECT_THAT(changes.fused_into, UnorderedElementsAre(Pair("x", "fusion.1"), Pair("a", "fusion.9"),
                                                       Pair("b", "fusion.1")));
  EXPECT_THAT(changes.added, ElementsAre("fusion.1", "fusion.9"));
  EXPECT_THAT(changes.modified, ElementsAre("t"));
  EXPECT_THAT(changes.removed, IsEmpty());
}

// A fusion whose instruction prints the same but whose fused computation changed is modified;
// instructions of non-fused computations (a reducer) are top-level like the entry's.
TEST(StageChangesTest, AFusionIsModifiedWhenItsFusedComputationChanges) {
  ManifestStageChanges changes = Compare(R"(HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fc {
  param_0 = f32[4] parameter(0)
  ROOT n = f32[4] negate(param_0)
}
ENTRY e {
  p = f32[4] parameter(0)
  fusion = f32[4] fusion(p), kind=kLoop, calls=fc
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(fusion, zero), dimensions={0}, to_apply=sum
})",
                                         R"(HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
fc {
  param_0 = f32[4] parameter(0)
  ROOT n = f32[4] abs(param_0)
}
ENTRY e {
  p = f32[4] parameter(0)
  fusion = f32[4] fusion(p), kind=kLoop, calls=fc
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(fusion, zero), dimensions={0}, to_apply=sum
})");
  EXPECT_THAT(changes.modified, ElementsAre("fusion", "s"));
  EXPECT_THAT(changes.added, IsEmpty());
  EXPECT_THAT(changes.removed, IsEmpty());
  EXPECT_THAT(changes.fused_into, IsEmpty());
}

}  // namespace
}  // namespace xlens
