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

}  // namespace
}  // namespace xlens::runtime
