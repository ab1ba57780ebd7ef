#include "compiler/support/large_allocation.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <gtest/gtest.h>

namespace xlens {
namespace {

// The THPeligible line of the mapping that holds `p` in /proc/self/smaps: "1" where the kernel
// may back it with huge pages, "" where the file or the field is missing.
std::string HugePageEligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= address && address < end;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) {
      std::istringstream value(line.substr(12));
      std::string v;
      value >> v;
      return v;
    }
  }
  return "";
}

std::string TransparentHugePageMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(f, text);
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? ""
                                                                   : text.substr(open + 1, close - open - 1);
}

TEST(LargeAllocationTest, SmallBuffersAreAlignedToALine) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kHugePageBytes - 1}) {
    void* p = AllocateLarge(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 1, bytes);
    std::free(p);
  }
}

TEST(LargeAllocationTest, LargeBuffersAreAlignedToAHugePageAndAskForThem) {
  const size_t bytes = 3 * kHugePageBytes + 12345;  // not a whole number of huge pages
  void* p = AllocateLarge(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  std::memset(p, 1, bytes);
  const std::string mode = TransparentHugePageMode();
  const std::string eligible = HugePageEligible(p);
  std::free(p);
  if ((mode != "madvise" && mode != "always") || eligible.empty()) {
    GTEST_SKIP() << "transparent huge pages are off here, or smaps does not say (mode '" << mode << "')";
  }
  EXPECT_EQ(eligible, "1");
}

// A range kept on small pages is no longer eligible for huge pages, and the rest of the block,
// whole huge pages on either side of it, still is.
TEST(LargeAllocationTest, ARangeKeptOnSmallPagesLeavesTheRestOnHugePages) {
  const size_t bytes = 6 * kHugePageBytes;
  char* p = static_cast<char*>(AllocateLarge(bytes));
  ASSERT_NE(p, nullptr);
  // Not on page boundaries, as an operand's buffer lies in the arena: widened to 4 KiB pages.
  char* kept = p + 2 * kHugePageBytes + 100;
  KeepOnSmallPages(kept, kHugePageBytes);
  std::memset(p, 1, bytes);
  const std::string mode = TransparentHugePageMode();
  const std::string before = HugePageEligible(p), inside = HugePageEligible(kept),
                    inside_last = HugePageEligible(kept + kHugePageBytes - 1),
                    after = HugePageEligible(p + 5 * kHugePageBytes);
  std::free(p);
  if ((mode != "madvise" && mode != "always") || before.empty()) {
    GTEST_SKIP() << "transparent huge pages are off here, or smaps does not say (mode '" << mode << "')";
  }
  EXPECT_EQ(before, "1");
  EXPECT_EQ(inside, "0");
  EXPECT_EQ(inside_last, "0");
  EXPECT_EQ(after, "1");
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Three 12 MiB blocks allocated, written and freed together, as a call's results are: glibc's
// own thresholds trim the heap's top past twice the largest block freed, so each round got fresh
// pages again (9216 faults) unless the freed blocks are kept.
TEST(LargeAllocationTest, FreedLargeBlocksAreReusedWithoutFaultingTheirPagesAgain) {
  if (ProcessTunesItsAllocator()) GTEST_SKIP() << "the environment sets glibc's malloc tunables";
  RetainFreedLargeBlocks();
  constexpr size_t kBytes = size_t{12} << 20, kPage = 4096;
  long faults_after_first = 0;
  for (int round = 0; round < 3; ++round) {
    if (round == 1) faults_after_first = MinorFaults();
    volatile char* blocks[3];
    for (volatile char*& b : blocks) {
      b = static_cast<volatile char*>(std::malloc(kBytes));
      ASSERT_NE(b, nullptr);
      for (size_t i = 0; i < kBytes; i += kPage) b[i] = 1;
    }
    for (volatile char* b : blocks) std::free(const_cast<char*>(b));
  }
  // Two rounds of 3 * 3072 pages each; a few faults for the heap's own bookkeeping at most.
  EXPECT_LT(MinorFaults() - faults_after_first, 256);
}

// The allocator setting is the whole process's: one that sets glibc's own tunables keeps them.
TEST(LargeAllocationTest, AProcessThatTunesGlibcsAllocatorKeepsItsTuning) {
  const char* names[] = {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                         "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"};
  const std::string arena_max = "MALLOC_ARENA_MAX";  // not a setting of mapping or trimming
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const char* name : names) {
    const char* value = std::getenv(name);
    saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    unsetenv(name);
  }
  EXPECT_FALSE(ProcessTunesItsAllocator());
  for (const char* name : names) {
    if (std::string(name) == "GLIBC_TUNABLES") continue;
    setenv(name, "65536", 1);
    EXPECT_EQ(ProcessTunesItsAllocator(), name != arena_max) << name;
    unsetenv(name);
  }
  setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.arena_max=2", 1);
  EXPECT_FALSE(ProcessTunesItsAllocator());
  setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.mmap_max=65536", 1);
  EXPECT_TRUE(ProcessTunesItsAllocator());
  for (const auto& [name, value] : saved) {
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
}

}  // namespace
}  // namespace xlens
