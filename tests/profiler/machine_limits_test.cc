#include "profiler/machine_limits.h"

#include <algorithm>
#include <thread>

#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

// L1 64 KiB, L2 2 MiB, LLC 32 MiB over two cores; bandwidth falling with the working set.
MachineLimits TwoCoreLimits() {
  MachineLimits limits;
  limits.threads = 2;
  limits.caches = {{1, 32 << 10, 2}, {2, 1 << 20, 2}, {3, 32 << 20, 1}};
  limits.sweep = {{32 << 10, 400, 450, 500},  // copy, triad, read
                  {1 << 20, 200, 210, 220},
                  {16 << 20, 60, 62, 70},
                  {64 << 20, 30, 31, 33}};
  limits.memory = {384 << 20, 20, 25, 28};
  limits.peak_gflops = 200;
  return limits;
}

TEST(MachineLimits, BandwidthIsTheFastestKernelAtTheLargestPointNotAboveTheWorkingSet) {
  const MachineLimits limits = TwoCoreLimits();
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(1 << 10), 500) << "below the sweep: its smallest point";
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(512 << 10), 500) << "between points: the smaller one's, an upper bound";
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(1 << 20), 220);
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(20 << 20), 70) << "fits in the LLC: held to the LLC";
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(1e9), 28) << "beyond the sweep: memory";
}

TEST(MachineLimits, AJaggedCurveNeverLowersTheBound) {
  MachineLimits limits = TwoCoreLimits();
  limits.sweep[2] = {16 << 20, 10, 10, 10};  // a neighbour took the bus during this point
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(20 << 20), 33) << "a larger working set measured faster";
}

TEST(MachineLimits, TheQuickSweepHasEachLevelsHalfAndWholeCapacity) {
  constexpr int64_t KiB = 1 << 10, MiB = 1 << 20;
  const std::vector<CacheLevel> caches = {{1, 32 * KiB, 2}, {2, MiB, 2}, {3, 32 * MiB, 1}};
  EXPECT_EQ(SweepWorkingSets(caches, /*fine=*/false, 64 * MiB),
            (std::vector<int64_t>{32 * KiB, 64 * KiB, MiB, 2 * MiB, 16 * MiB, 32 * MiB, 64 * MiB}));
  // A working set just past the LLC is held to the point at its capacity, which no longer
  // holds it, not to the rate well inside it (33.6 MB of layer norm held to 152 GB/s where it
  // ran at 54 and memory gave 70).
  MachineLimits limits = TwoCoreLimits();
  limits.sweep = {{32 * KiB, 400, 450, 500}, {64 * KiB, 380, 400, 450}, {MiB, 200, 210, 220},
                  {2 * MiB, 150, 160, 170},  {16 * MiB, 140, 150, 152}, {32 * MiB, 46, 50, 60},
                  {64 * MiB, 30, 31, 33}};
  limits.memory = {192 * MiB, 64, 40, 30};
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(33.56e6), 64) << "memory's copy, the fastest point beyond it";
  EXPECT_EQ(limits.LevelOf(33.56e6), "mem");
  EXPECT_DOUBLE_EQ(limits.BandwidthGBps(20 * MiB), 152) << "inside the LLC: the LLC's";
  // Where sysfs names no cache, a 32 MiB last level is assumed: both sweeps still reach past it.
  EXPECT_EQ(SweepWorkingSets({}, /*fine=*/false, 64 * MiB), (std::vector<int64_t>{64 * MiB}));
  EXPECT_EQ(SweepWorkingSets({}, /*fine=*/true, 512 * MiB).back(), 256 * MiB);
  // The fine sweep steps by half-octaves from 16 KiB.
  const std::vector<int64_t> fine = SweepWorkingSets(caches, /*fine=*/true, 128 * MiB);
  ASSERT_GE(fine.size(), 2u);
  EXPECT_EQ(fine[0], 16 * KiB);
  EXPECT_EQ(fine[1], static_cast<int64_t>(16 * KiB * 1.4142) / 4096 * 4096);
  EXPECT_EQ(fine.back(), 256 * MiB);
}

TEST(MachineLimits, LevelOfNamesTheInnermostCacheThatHoldsTheWorkingSet) {
  const MachineLimits limits = TwoCoreLimits();
  EXPECT_EQ(limits.LevelOf(60 << 10), "L1");
  EXPECT_EQ(limits.LevelOf(1 << 20), "L2");
  EXPECT_EQ(limits.LevelOf(30 << 20), "LLC");
  EXPECT_EQ(limits.LevelOf(40 << 20), "mem");
}

TEST(MachineLimits, BoundIsTheLongerOfTheMemoryAndComputeFloors) {
  const MachineLimits limits = TwoCoreLimits();
  // 1 GB from memory at 28 GB/s: 35.7 ms; 1 GFLOP at 200 GFLOP/s: 5 ms.
  EXPECT_NEAR(limits.BoundNs(1e9, 1e9), 1e9 / 28, 1);
  // 1 MB in L2 at 220 GB/s: 4.5 us; 10 GFLOP: 50 ms.
  EXPECT_NEAR(limits.BoundNs(1 << 20, 1e10), 5e7, 1);
  EXPECT_EQ(limits.BoundNs(0, 0), 0);
}

TEST(MachineLimits, KernelsMeasureSomethingPlausibleQuickly) {
  // Tiny sizes: a smoke run of every kernel, not a measurement.
  for (StreamKernel k : {StreamKernel::kCopy, StreamKernel::kTriad, StreamKernel::kRead}) {
    const double gbps = StreamBandwidthGBps(k, 64 << 10, 2, 1, 1 << 20);
    EXPECT_GT(gbps, 0.1) << StreamKernelName(k);
    EXPECT_LT(gbps, 1e5) << StreamKernelName(k);
  }
  const double gflops = PeakGflops(1, 1, 1 << 12);
  EXPECT_GT(gflops, 0.1);
  EXPECT_LT(gflops, 1e5);
}

TEST(MachineLimits, CachesComeInnermostFirst) {
  const std::vector<CacheLevel> caches = DataCaches();
  for (size_t i = 1; i < caches.size(); ++i) EXPECT_LT(caches[i - 1].level, caches[i].level);
  for (const CacheLevel& c : caches) EXPECT_GT(c.total_bytes(), 0);
}

TEST(MachineLimits, ACacheCountsAtMostItsShareOfTheCpusThatShareIt) {
  constexpr int64_t MiB = int64_t{1} << 20;
  // A 2-CPU virtual machine shown its host's 480 MiB: 20 MiB a CPU.
  EXPECT_EQ(CacheShareBytes(480 * MiB, 2), 40 * MiB);
  // Caches within a part's share per core count whole.
  EXPECT_EQ(CacheShareBytes(32 * MiB, 2), 32 * MiB);
  EXPECT_EQ(CacheShareBytes(96 * MiB, 8), 96 * MiB);
  EXPECT_EQ(CacheShareBytes(2 * MiB, 1), 2 * MiB);
  EXPECT_EQ(CacheShareBytes(64 * MiB, 0), 20 * MiB);
  // What every reader of the caches sees (the streaming-store threshold, the stream kernels,
  // memory's array size) is the share, never more than sysfs says.
  for (const CacheLevel& c : DataCaches()) {
    EXPECT_LE(c.bytes, c.reported_bytes);
    EXPECT_LE(c.bytes, kMaxCacheBytesPerCpu * static_cast<int64_t>(
                                                  std::max(1u, std::thread::hardware_concurrency())))
        << "L" << c.level;
  }
}

}  // namespace
}  // namespace xlens::profiler
