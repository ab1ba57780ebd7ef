#include "compiler/runtime/compilation_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens::runtime {
namespace {

std::unique_ptr<HloModule> Axpy(int n) {
  const std::string text = "HloModule axpy\nENTRY e {\n  a = f32[] parameter(0)\n  x = f32[" +
                           std::to_string(n) + "] parameter(1)\n  b = f32[" + std::to_string(n) +
                           "] broadcast(a), dimensions={}\n  ROOT m = f32[" + std::to_string(n) +
                           "] multiply(b, x)\n}\n";
  return std::move(ParseHloModule(text).value());
}

TEST(CompilationCacheTest, SameShapesCompileOnceNewShapesRecompileVisibly) {
  std::vector<std::string> log;
  CompilationCache cache([&](const std::string& line) { log.push_back(line); });
  auto first = cache.GetOrCompile(*Axpy(8), {});
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto again = cache.GetOrCompile(*Axpy(8), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->get(), again->get());
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_TRUE(log.empty());

  auto bigger = cache.GetOrCompile(*Axpy(16), {});
  ASSERT_TRUE(bigger.ok());
  EXPECT_NE(first->get(), bigger->get());
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_THAT(log, ::testing::ElementsAre(
                       "recompiling axpy: argument shapes changed from (f32[], f32[8]) to (f32[], f32[16])"));

  // Other flags are another executable too, but not a shape change.
  CompileOptions no_fusion;
  no_fusion.optimize.filter.disabled = {"fusion"};
  auto unfused = cache.GetOrCompile(*Axpy(16), no_fusion);
  ASSERT_TRUE(unfused.ok());
  EXPECT_NE(bigger->get(), unfused->get());
  EXPECT_EQ(log.size(), 1u);
}

// A module with collectives is compiled for its devices: its groups were checked against them
// and its replica-id answers within them. The executable for 4 devices is not served for 2.
TEST(CompilationCacheTest, DeviceCountsArePartOfTheKey) {
  const std::string text = R"(HloModule ar
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8] parameter(0)
  ROOT r = f32[8] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=sum
}
)";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  CompilationCache cache([](const std::string&) {});
  CompileOptions four;
  four.topology = DeviceTopology{4, 1};
  auto on_four = cache.GetOrCompile(**module, four);
  ASSERT_TRUE(on_four.ok()) << on_four.status().message();
  auto again = cache.GetOrCompile(**module, four);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(on_four->get(), again->get());

  // On 2 devices the group {0,1,2,3} names devices that do not exist: compiling says so.
  CompileOptions two;
  two.topology = DeviceTopology{2, 1};
  auto on_two = cache.GetOrCompile(**module, two);
  EXPECT_FALSE(on_two.ok());
  EXPECT_EQ(cache.misses(), 2);

  // 4 replicas of 2 partitions each are other devices too.
  CompileOptions partitions;
  partitions.topology = DeviceTopology{4, 2};
  auto on_partitions = cache.GetOrCompile(**module, partitions);
  ASSERT_TRUE(on_partitions.ok()) << on_partitions.status().message();
  EXPECT_NE(on_four->get(), on_partitions->get());
}

}  // namespace
}  // namespace xlens::runtime
