#include "compiler/support/cpu_features.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace xlens {
namespace {

// The flags the kernel lists for the first CPU in /proc/cpuinfo: an answer from outside cpuid.
std::set<std::string> ProcCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuFeaturesTest, AgreeWithTheKernelsCpuFlags) {
#if defined(__x86_64__) && defined(__linux__)
  const std::set<std::string> flags = ProcCpuFlags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(CpuHasAvx512F(), flags.count("avx512f") == 1);
  EXPECT_EQ(CpuHasAvx2Fma(), flags.count("avx2") == 1 && flags.count("fma") == 1);
#else
  EXPECT_FALSE(CpuHasAvx512F());
  EXPECT_FALSE(CpuHasAvx2Fma());
#endif
}

}  // namespace
}  // namespace xlens
