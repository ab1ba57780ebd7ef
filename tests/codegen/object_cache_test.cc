// The compiled-partition cache (compiler/codegen/cpu/object_cache.h) through the JIT: a module
// compiled once is loaded from the persistent directory by a fresh JIT with nothing compiled;
// truncated, garbage, oversized (sparse), foreign and mislabelled entries are reported,
// recompiled and rewritten, never loaded; a different optimization level is a different key;
// links planted at entry names are replaced, never followed; a directory that others can write
// is not used. The module has two exported functions (two partitions where there are two
// threads), an internal helper and an internal constant table, so partitioning
// (module_partition.h) is exercised too.
#include "compiler/codegen/cpu/object_cache.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <fmt/format.h>
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

// Two modules with the same function and different code: the entry of one is valid, by its
// magic, length and checksum, under the other's name.
constexpr const char* kTimes3 = R"(
define i64 @scale(i64 %x) {
  %r = mul i64 %x, 3
  ret i64 %r
}
)";
constexpr const char* kTimes5 = R"(
define i64 @scale(i64 %x) {
  %r = mul i64 %x, 5
  ret i64 %r
}
)";

struct Compiled {
  std::unique_ptr<CpuJit> jit;
  CompiledIr ir;
};

Compiled Compile(const std::string& dir, int opt_level = 2, const char* ir_text = kIr) {
  auto context = std::make_unique<llvm::LLVMContext>();
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(ir_text, diagnostic, *context);
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

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
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
    ObjectCache::SetMaxEntryBytes(-1);
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
      {"an entry of format version 1", good.substr(0, 8) + std::string("\x01\0\0\0", 4) +
                                           good.substr(12)},
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

TEST_F(ObjectCacheTest, AnUnusableDirectoryIsOneWarningNotAFailure) {
  const std::string file = dir_ + "/not_a_directory";
  std::ofstream(file) << "x";
  Compiled compiled = Compile(file);
  ExpectWorks(*compiled.jit);
  ASSERT_EQ(compiled.ir.warnings.size(), 1u);
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr(file + " is not a directory"));
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr("compiling without the cache"));
}

int64_t Scale(CpuJit& jit, int64_t x) {
  auto f = jit.Lookup("scale");
  EXPECT_TRUE(f.ok());
  return f.ok() ? reinterpret_cast<int64_t (*)(int64_t)>(*f)(x) : -1;
}

TEST_F(ObjectCacheTest, AnotherKeysValidEntryUnderThisNameIsRecompiledNotRun) {
  const std::string three_dir = dir_ + "/three";
  const std::string five_dir = dir_ + "/five";
  Compiled three = Compile(three_dir, 2, kTimes3);
  Compiled five = Compile(five_dir, 2, kTimes5);
  EXPECT_EQ(Scale(*three.jit, 2), 6);
  EXPECT_EQ(Scale(*five.jit, 2), 10);
  ASSERT_EQ(Entries(three_dir).size(), 1u);
  ASSERT_EQ(Entries(five_dir).size(), 1u);
  const std::string five_entry = Entries(five_dir)[0].string();
  std::filesystem::copy_file(Entries(three_dir)[0], five_entry,
                             std::filesystem::copy_options::overwrite_existing);

  ObjectCache::Global().Clear();
  Compiled again = Compile(five_dir, 2, kTimes5);
  ASSERT_EQ(again.ir.warnings.size(), 1u);
  EXPECT_THAT(again.ir.warnings[0], ::testing::HasSubstr(five_entry));
  EXPECT_THAT(again.ir.warnings[0], ::testing::HasSubstr("holds the code of another key"));
  EXPECT_EQ(again.ir.cached_partitions, 0);
  EXPECT_EQ(Scale(*again.jit, 2), 10);
  // Rewritten with the right code: the next process loads it.
  ObjectCache::Global().Clear();
  Compiled after = Compile(five_dir, 2, kTimes5);
  EXPECT_THAT(after.ir.warnings, ::testing::IsEmpty());
  EXPECT_EQ(after.ir.cached_partitions, 1);
  EXPECT_EQ(Scale(*after.jit, 2), 10);
}

TEST_F(ObjectCacheTest, LinksPlantedAtEntryNamesAreReplacedNeverFollowed) {
  const std::string cache = dir_ + "/cache";
  Compile(cache);
  const std::vector<std::filesystem::path> entries = Entries(cache);
  ASSERT_FALSE(entries.empty());
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious";
  for (const bool dangling : {false, true}) {
    SCOPED_TRACE(dangling ? "dangling links" : "links to a victim file");
    std::vector<std::string> targets;
    for (size_t i = 0; i < entries.size(); ++i) {
      targets.push_back(dangling ? fmt::format("{}/created{}", dir_, i) : victim);
      std::filesystem::remove(entries[i]);
      std::filesystem::create_symlink(targets.back(), entries[i]);
    }
    ObjectCache::Global().Clear();
    Compiled again = Compile(cache);
    ExpectWorks(*again.jit);
    EXPECT_EQ(again.ir.cached_partitions, 0);
    ASSERT_EQ(again.ir.warnings.size(), entries.size());
    for (const std::string& warning : again.ir.warnings) {
      EXPECT_THAT(warning, ::testing::HasSubstr("is a symbolic link, which is not followed"));
    }
    EXPECT_EQ(Contents(victim), "precious");
    for (const std::string& target : targets) {
      if (dangling) {
        EXPECT_FALSE(std::filesystem::exists(target)) << target << " was created";
      }
    }
    // Each link was replaced by a real entry, and nothing else was left in the directory.
    EXPECT_EQ(Entries(cache), entries);
    for (const auto& entry : entries) EXPECT_FALSE(std::filesystem::is_symlink(entry));
    ObjectCache::Global().Clear();
    Compiled after = Compile(cache);
    EXPECT_THAT(after.ir.warnings, ::testing::IsEmpty());
    EXPECT_EQ(after.ir.cached_partitions, after.ir.partitions);
  }
}

TEST_F(ObjectCacheTest, AMissingDirectoryIsCreatedPrivate) {
  const std::string cache = dir_ + "/a/b/cache";
  Compiled compiled = Compile(cache);
  EXPECT_THAT(compiled.ir.warnings, ::testing::IsEmpty());
  struct stat st;
  ASSERT_EQ(::stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(Entries(cache).size(), static_cast<size_t>(compiled.ir.partitions));
}

// Valid entries copied into `cache`, then the directory made `mode`: they are not loaded and
// nothing is written there; one warning, which says `said`.
void ExpectDirectoryRefused(const std::string& dir, const std::string& cache,
                            const std::function<void()>& spoil, const std::string& said) {
  const std::string good = dir + "/good";
  ObjectCache::Global().Clear();
  Compile(good);
  std::filesystem::create_directory(cache);
  for (const auto& entry : Entries(good)) {
    std::filesystem::copy_file(entry, cache + "/" + entry.filename().string());
  }
  const std::vector<std::filesystem::path> before = Entries(cache);
  spoil();
  ObjectCache::Global().Clear();
  Compiled compiled = Compile(cache);
  ExpectWorks(*compiled.jit);
  EXPECT_EQ(compiled.ir.cached_partitions, 0);
  ASSERT_EQ(compiled.ir.warnings.size(), 1u) << "one warning, whatever the partitions";
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr("persistent cache directory " + cache));
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr(said));
  EXPECT_THAT(compiled.ir.warnings[0], ::testing::HasSubstr("compiling without the cache"));
  EXPECT_EQ(Entries(cache).size(), before.size());
}

TEST_F(ObjectCacheTest, ADirectoryOthersCanWriteIsNotUsed) {
  const std::vector<std::pair<mode_t, std::string>> modes = {
      {0770, "can be written by its group (mode 0770)"},
      {0707, "can be written by every user (mode 0707)"},
      {01777, "can be written by every user (mode 1777)"},
  };
  for (const auto& [mode, said] : modes) {
    SCOPED_TRACE(said);
    const std::string cache = fmt::format("{}/shared{:o}", dir_, mode);
    ExpectDirectoryRefused(dir_, cache, [&] { ::chmod(cache.c_str(), mode); }, said);
    std::filesystem::remove_all(dir_ + "/good");
  }
}

TEST_F(ObjectCacheTest, ADirectoryOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  const std::string cache = dir_ + "/theirs";
  ExpectDirectoryRefused(dir_, cache, [&] { ASSERT_EQ(::chown(cache.c_str(), 65534, 65534), 0); },
                         "belongs to user id 65534, not to this user (id 0)");
}

int64_t PeakRssKb() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST_F(ObjectCacheTest, AHugeSparseEntryIsRefusedByItsSizeNotRead) {
  Compile(dir_);
  const std::string path = Entries(dir_).front().string();
  ASSERT_EQ(::truncate(path.c_str(), int64_t{3} << 29), 0);  // 1.5 GiB, almost all holes
  const int64_t peak_before = PeakRssKb();
  ObjectCache::Global().Clear();
  Compiled again = Compile(dir_);
  ExpectWorks(*again.jit);
  ASSERT_EQ(again.ir.warnings.size(), 1u);
  EXPECT_THAT(again.ir.warnings[0],
              ::testing::HasSubstr("is corrupt (1.5 GiB is more than the 1 GiB limit on cache entries)"));
  EXPECT_LT(PeakRssKb() - peak_before, 256 << 10) << "the entry was read";
  EXPECT_LT(std::filesystem::file_size(path), 1u << 30) << "the entry was not rewritten";
}

TEST_F(ObjectCacheTest, TheEntrySizeLimitIsConfigurable) {
  ObjectCache::SetMaxEntryBytes(100);
  Compiled small = Compile(dir_);
  ExpectWorks(*small.jit);
  EXPECT_THAT(small.ir.warnings, ::testing::IsEmpty());
  EXPECT_THAT(Entries(dir_), ::testing::IsEmpty()) << "code over the limit is not written";

  ObjectCache::SetMaxEntryBytes(-1);
  ObjectCache::Global().Clear();
  Compile(dir_);
  const std::vector<std::filesystem::path> entries = Entries(dir_);
  ASSERT_FALSE(entries.empty());
  ObjectCache::SetMaxEntryBytes(100);
  ObjectCache::Global().Clear();
  Compiled limited = Compile(dir_);
  ExpectWorks(*limited.jit);
  ASSERT_EQ(limited.ir.warnings.size(), entries.size());
  EXPECT_THAT(limited.ir.warnings[0], ::testing::HasSubstr("more than the 100 bytes limit"));
}

TEST_F(ObjectCacheTest, ConcurrentWritersOfAKeyLeaveOneValidEntry) {
  const std::string key(64, 'c');
  const std::string object = std::string(1 << 20, 'o') + "end";
  std::atomic<int> problems{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        ObjectCache cache;  // a process of its own
        std::string warning;
        cache.Insert(key, object, dir_, &warning);
        if (!warning.empty()) ++problems;
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        ObjectCache cache;
        std::string warning;
        std::optional<std::string> got = cache.Lookup(key, dir_, &warning);
        if (!warning.empty() || (got && *got != object)) ++problems;
        if (got) ++hits;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(problems.load(), 0);
  ASSERT_EQ(Entries(dir_).size(), 1u) << "temporaries were left behind";
  ObjectCache fresh;
  std::string warning;
  EXPECT_EQ(fresh.Lookup(key, dir_, &warning), object);
  EXPECT_EQ(warning, "");
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
