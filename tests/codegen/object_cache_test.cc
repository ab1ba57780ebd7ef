// The compiled-partition cache (compiler/codegen/cpu/object_cache.h) through the JIT: a module
// compiled once is loaded from the persistent directory by a fresh JIT with nothing compiled;
// truncated, garbage and mislabelled entries are reported, recompiled and rewritten, never
// loaded; a different optimization level is a different key. The module has two exported
// functions (two partitions where there are two threads), an internal helper and an internal
// constant table, so partitioning (module_partition.h) is exercised too.
#include "compiler/codegen/cpu/object_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SourceMgr.h>

#include "compiler/codegen/cpu/cpu_jit.h"

namespace xlens::codegen {
namespace {

constexpr const char* kIr = R"(
@table = internal constant [4 x i64] [i64 10, i64 20, i64 30, i64 40]

define internal i64 @helper(i64 %x) {
  %y = mul i64 %x, 3
  ret i64 %y
}

define i64 @triple_plus_one(i64 %x) {
  %h = call i64 @helper(i64 %x)
  %r = add i64 %h, 1
  ret i64 %r
}

define i64 @lookup_then_triple(i64 %i) {
  %p = getelementptr [4 x i64], ptr @table, i64 0, i64 %i
  %v = load i64, ptr %p
  %r = call i64 @triple_plus_one(i64 %v)
  ret i64 %r
}
)";

struct Compiled {
  std::unique_ptr<CpuJit> jit;
  CompiledIr ir;
};

Compiled Compile(const std::string& dir, int opt_level = 2) {
  auto context = std::make_unique<llvm::LLVMContext>();
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(kIr, diagnostic, *context);
  EXPECT_NE(module, nullptr) << diagnostic.getMessage().str();
  auto jit = CpuJit::Create({opt_level, dir});
  EXPECT_TRUE(jit.ok()) << jit.status().message();
  auto ir = (*jit)->AddModule(std::move(module), std::move(context), /*keep_ir=*/false);
  EXPECT_TRUE(ir.ok()) << ir.status().message();
  return {std::move(*jit), ir.ok() ? *ir : CompiledIr{}};
}

// The compiled functions compute what the IR says.
void ExpectWorks(CpuJit& jit) {
  auto a = jit.Lookup("triple_plus_one");
  auto b = jit.Lookup("lookup_then_triple");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<int64_t (*)(int64_t)>(*a)(5), 16);
  EXPECT_EQ(reinterpret_cast<int64_t (*)(int64_t)>(*b)(2), 91);
}

std::vector<std::filesystem::path> Entries(const std::string& dir) {
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  return entries;
}

class ObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/xlens_object_cache_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ObjectCache::Global().Clear();
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    ObjectCache::Global().Clear();
  }
  std::string dir_;
};

TEST_F(ObjectCacheTest, ASecondProcessLoadsEveryPartitionFromTheDirectory) {
  Compiled first = Compile(dir_);
  ExpectWorks(*first.jit);
  EXPECT_EQ(first.ir.cached_partitions, 0);
  EXPECT_THAT(first.ir.warnings, ::testing::IsEmpty());
  ASSERT_GE(first.ir.partitions, 1);
  EXPECT_EQ(Entries(dir_).size(), static_cast<size_t>(first.ir.partitions));

  ObjectCache::Global().Clear();  // as a new process would start
  Compiled second = Compile(dir_);
  EXPECT_EQ(second.ir.cached_partitions, second.ir.partitions);
  ExpectWorks(*second.jit);

  // Another optimization level is another key: compiled, and stored beside the first.
  ObjectCache::Global().Clear();
  Compiled o1 = Compile(dir_, 1);
  EXPECT_EQ(o1.ir.cached_partitions, 0);
  ExpectWorks(*o1.jit);
  EXPECT_EQ(Entries(dir_).size(), static_cast<size_t>(first.ir.partitions + o1.ir.partitions));
}

TEST_F(ObjectCacheTest, CorruptEntriesAreReportedRecompiledAndRewritten) {
  Compiled first = Compile(dir_);
  const std::vector<std::filesystem::path> entries = Entries(dir_);
  ASSERT_FALSE(entries.empty());
  const std::string path = entries.front().string();
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::vector<std::pair<std::string, std::string>> corruptions = {
      {"truncated header", good.substr(0, 10)},
      {"holds", good.substr(0, good.size() - 100)},  // truncated code
      {"not a cache entry", std::string(good.size(), 'x')},
      {"checksum mismatch", good.substr(0, good.size() - 1) + static_cast<char>(good.back() ^ 1)},
      {"truncated header", ""},
  };
  for (const auto& [why, contents] : corruptions) {
    SCOPED_TRACE(why);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << contents;
    }
    ObjectCache::Global().Clear();
    Compiled again = Compile(dir_);
    ASSERT_EQ(again.ir.warnings.size(), 1u);
    EXPECT_THAT(again.ir.warnings[0], ::testing::HasSubstr(path));
    EXPECT_THAT(again.ir.warnings[0], ::testing::HasSubstr("is corrupt (" + why));
    EXPECT_THAT(again.ir.warnings[0], ::testing::HasSubstr("recompiling"));
    EXPECT_EQ(again.ir.cached_partitions, again.ir.partitions - 1);
    ExpectWorks(*again.jit);
    // The recompilation rewrote the entry: the next process loads everything.
    ObjectCache::Global().Clear();
    Compiled after = Compile(dir_);
    EXPECT_THAT(after.ir.warnings, ::testing::IsEmpty());
    EXPECT_EQ(after.ir.cached_partitions, after.ir.partitions);
    ExpectWorks(*after.jit);
  }
}

TEST_F(ObjectCacheTest, AnUnwritableDirectoryIsAWarningNotAFailure) {
  const std::string file = dir_ + "/not_a_directory";
  std::ofstream(file) << "x";
  Compiled compiled = Compile(file);
  ExpectWorks(*compiled.jit);
  ASSERT_FALSE(compiled.ir.warnings.empty());
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr("cannot write persistent cache entry"));
}

TEST(ObjectCacheKeyTest, EveryInputOfTheKeyChangesIt) {
  const std::string base = ObjectCache::Key("bitcode", 3, "x86_64", "cpu", "+avx");
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, ObjectCache::Key("bitcode", 3, "x86_64", "cpu", "+avx"));
  EXPECT_NE(base, ObjectCache::Key("bitcodf", 3, "x86_64", "cpu", "+avx"));
  EXPECT_NE(base, ObjectCache::Key("bitcode", 2, "x86_64", "cpu", "+avx"));
  EXPECT_NE(base, ObjectCache::Key("bitcode", 3, "aarch64", "cpu", "+avx"));
  EXPECT_NE(base, ObjectCache::Key("bitcode", 3, "x86_64", "cpu2", "+avx"));
  EXPECT_NE(base, ObjectCache::Key("bitcode", 3, "x86_64", "cpu", "+avx2"));
}

}  // namespace
}  // namespace xlens::codegen
