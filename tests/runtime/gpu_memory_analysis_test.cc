// Synthetic access streams with known answers: what Nsight Compute reports for the classic
// patterns (CUDA Best Practices Guide, "Coalesced Access to Global Memory" and "Shared Memory
// and Memory Banks").
#include "compiler/runtime/gpu_memory_analysis.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace xlens::runtime {
namespace {

constexpr uint64_t kBase = 0x10000;  // 256-byte aligned, as cudaMalloc's are

// One warp-wide f32 access per warp of a block of `threads`, lane t at base + t * stride bytes.
KernelMemoryStats OneAccess(int threads, uint64_t stride, GpuMemorySpace space,
                            GpuAccessKind kind = GpuAccessKind::kLoad, int bytes = 4,
                            uint64_t base = kBase) {
  GpuBlockRecorder block(0);
  for (int t = 0; t < threads; ++t) block.Record(t, 0, base + t * stride, bytes, space, kind);
  GpuMemoryAnalysis analysis(1);
  analysis.AddBlock(block);
  return analysis.Finish();
}

TEST(GpuMemoryAnalysisTest, CoalescedF32LoadIsFourSectorsPerRequest) {
  KernelMemoryStats s = OneAccess(256, 4, GpuMemorySpace::kGlobal);
  EXPECT_EQ(s.global_loads.requests, 8);  // one per warp
  EXPECT_EQ(s.global_loads.sectors, 32);
  EXPECT_DOUBLE_EQ(s.global_loads.SectorsPerRequest(), 4.0);
  EXPECT_EQ(s.global_loads.ideal_sectors, 32);
  EXPECT_EQ(s.dram_read_sectors, 32);  // 1 KiB
  EXPECT_EQ(s.dram_bytes(), 1024);
  EXPECT_EQ(s.dram_write_sectors, 0);
}

TEST(GpuMemoryAnalysisTest, MisalignedWarpTouchesAFifthSector) {
  KernelMemoryStats s = OneAccess(32, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad, 4, kBase + 4);
  EXPECT_EQ(s.global_loads.sectors, 5);
  EXPECT_EQ(s.global_loads.ideal_sectors, 4);
}

TEST(GpuMemoryAnalysisTest, StridedLoadTouchesASectorPerLane) {
  // Stride of 32 floats (a column of a row-major [*, 32] f32 array): every lane its own sector.
  KernelMemoryStats s = OneAccess(32, 128, GpuMemorySpace::kGlobal);
  EXPECT_EQ(s.global_loads.requests, 1);
  EXPECT_EQ(s.global_loads.sectors, 32);
  EXPECT_EQ(s.global_loads.ideal_sectors, 4);
  EXPECT_EQ(s.l2_sector_bytes(), 1024);
  // Stride 2: every other float, twice the sectors the bytes need.
  KernelMemoryStats two = OneAccess(32, 8, GpuMemorySpace::kGlobal);
  EXPECT_EQ(two.global_loads.sectors, 8);
  EXPECT_EQ(two.global_loads.ideal_sectors, 4);
}

TEST(GpuMemoryAnalysisTest, BroadcastIsOneSector) {
  KernelMemoryStats s = OneAccess(32, 0, GpuMemorySpace::kGlobal);
  EXPECT_EQ(s.global_loads.sectors, 1);
  EXPECT_EQ(s.global_loads.ideal_sectors, 1);
  EXPECT_EQ(s.global_loads.lane_accesses, 32);
}

TEST(GpuMemoryAnalysisTest, PartialWarpAndVectorLoads) {
  KernelMemoryStats half = OneAccess(16, 4, GpuMemorySpace::kGlobal);
  EXPECT_EQ(half.global_loads.requests, 1);
  EXPECT_EQ(half.global_loads.sectors, 2);
  // 128-bit loads by a full warp: 512 bytes, 16 sectors, all of them needed.
  KernelMemoryStats wide = OneAccess(32, 16, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad, 16);
  EXPECT_EQ(wide.global_loads.sectors, 16);
  EXPECT_EQ(wide.global_loads.ideal_sectors, 16);
}

TEST(GpuMemoryAnalysisTest, DynamicInstancesAreSeparateRequestsWhateverTheThreadOrder) {
  // A loop of 4 iterations, each reading 32 consecutive floats per warp at one site. Threads run
  // one after the other (as fibers run them) or interleaved: the same requests.
  auto run = [](bool fiber_order) {
    GpuBlockRecorder block(0);
    auto access = [&](int t, int i) {
      block.Record(t, 7, kBase + (i * 64 + t) * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
    };
    if (fiber_order) {
      for (int t = 0; t < 64; ++t)
        for (int i = 0; i < 4; ++i) access(t, i);
    } else {
      for (int i = 0; i < 4; ++i)
        for (int t = 63; t >= 0; --t) access(t, i);
    }
    GpuMemoryAnalysis analysis(1);
    analysis.AddBlock(block);
    return analysis.Finish();
  };
  for (bool fiber_order : {true, false}) {
    KernelMemoryStats s = run(fiber_order);
    EXPECT_EQ(s.global_loads.requests, 8) << fiber_order;  // 2 warps x 4 iterations
    EXPECT_EQ(s.global_loads.sectors, 32) << fiber_order;
    EXPECT_EQ(s.dram_read_sectors, 32) << fiber_order;
  }
}

TEST(GpuMemoryAnalysisTest, DramCountsEverySectorOnceAndStoresApart) {
  GpuBlockRecorder block(0);
  for (int t = 0; t < 32; ++t) {
    // Two sites read the same floats (the second from cache); one writes them back; one atomic
    // adds into a single float.
    block.Record(t, 0, kBase + t * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
    block.Record(t, 1, kBase + t * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
    block.Record(t, 2, kBase + t * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kStore);
    block.Record(t, 3, kBase + 4096, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kAtomic);
  }
  GpuMemoryAnalysis analysis(1);
  analysis.AddBlock(block);
  KernelMemoryStats s = analysis.Finish();
  EXPECT_EQ(s.global_loads.requests, 2);
  EXPECT_EQ(s.global_loads.sectors, 8);
  EXPECT_EQ(s.global_stores.requests, 2);
  EXPECT_EQ(s.global_stores.sectors, 5);
  EXPECT_EQ(s.dram_read_sectors, 5);   // 4 loaded + the atomic's
  EXPECT_EQ(s.dram_write_sectors, 5);  // 4 stored + the atomic's
}

TEST(GpuMemoryAnalysisTest, SharedMemoryBankConflicts) {
  // Consecutive floats: each bank once.
  KernelMemoryStats linear = OneAccess(32, 4, GpuMemorySpace::kShared, GpuAccessKind::kStore, 4, 0);
  EXPECT_EQ(linear.shared_stores.requests, 1);
  EXPECT_EQ(linear.shared_stores.wavefronts, 1);
  EXPECT_EQ(linear.shared_stores.bank_conflicts(), 0);
  EXPECT_EQ(linear.global_stores.requests, 0);
  EXPECT_EQ(linear.dram_bytes(), 0);
  // Stride 2 floats: a 2-way conflict.
  EXPECT_EQ(OneAccess(32, 8, GpuMemorySpace::kShared, GpuAccessKind::kLoad, 4, 0).shared_loads.bank_conflicts(), 1);
  // A column of a 32x32 float tile: all lanes in bank 0, 32-way.
  KernelMemoryStats column = OneAccess(32, 128, GpuMemorySpace::kShared, GpuAccessKind::kLoad, 4, 0);
  EXPECT_EQ(column.shared_loads.wavefronts, 32);
  EXPECT_EQ(column.shared_loads.bank_conflicts(), 31);
  // The same column of a tile padded to 33 floats a row: no conflict.
  EXPECT_EQ(OneAccess(32, 132, GpuMemorySpace::kShared, GpuAccessKind::kLoad, 4, 0).shared_loads.bank_conflicts(), 0);
  // One word to every lane is a broadcast.
  EXPECT_EQ(OneAccess(32, 0, GpuMemorySpace::kShared, GpuAccessKind::kLoad, 4, 0).shared_loads.bank_conflicts(), 0);
  // Consecutive doubles: two wavefronts, both needed.
  KernelMemoryStats doubles = OneAccess(32, 8, GpuMemorySpace::kShared, GpuAccessKind::kLoad, 8, 0);
  EXPECT_EQ(doubles.shared_loads.wavefronts, 2);
  EXPECT_EQ(doubles.shared_loads.bank_conflicts(), 0);
}

TEST(GpuMemoryAnalysisTest, SampledBlocksAreSpreadAndScaleToTheWholeLaunch) {
  EXPECT_EQ(SampledBlocks(10, 4), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(SampledBlocks(3, 4), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(SampledBlocks(0, 4), (std::vector<int64_t>{}));
  EXPECT_EQ(SampledBlocks(5, 0).size(), 5u);

  // A coalesced copy of 10 blocks of 128 floats, analysed whole and from 4 sampled blocks.
  auto block_of = [](int64_t b) {
    GpuBlockRecorder block(b);
    for (int t = 0; t < 128; ++t) {
      uint64_t offset = (b * 128 + t) * 4;
      block.Record(t, 0, kBase + offset, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
      block.Record(t, 1, kBase + (1 << 20) + offset, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kStore);
    }
    return block;
  };
  GpuMemoryAnalysis whole(10), sampled(10);
  for (int64_t b = 0; b < 10; ++b) whole.AddBlock(block_of(b));
  for (int64_t b : SampledBlocks(10, 4)) sampled.AddBlock(block_of(b));
  KernelMemoryStats w = whole.Finish(), s = sampled.Finish();
  EXPECT_FALSE(w.sampled());
  EXPECT_TRUE(s.sampled());
  EXPECT_EQ(s.blocks_analysed, 4);
  EXPECT_EQ(s.blocks, 10);
  EXPECT_EQ(w.global_loads.requests, 40);
  EXPECT_EQ(s.global_loads.requests, w.global_loads.requests);
  EXPECT_EQ(s.global_stores.sectors, w.global_stores.sectors);
  EXPECT_EQ(s.dram_bytes(), w.dram_bytes());
  EXPECT_EQ(w.dram_bytes(), 2 * 10 * 128 * 4);
}

TEST(GpuMemoryAnalysisTest, ScalarLoadsTheVectorizerMergesAreOneRequest) {
  // Each thread loads 4 consecutive floats at 4 sites, interleaved with another array's 4 (as an
  // unrolled elementwise kernel does before the NVPTX back end merges them into ld.v4.f32): 16
  // sectors per request, all needed. Unmerged, each site's request would touch 16 sectors for
  // 4 sectors' worth of bytes.
  auto run = [](bool vectorize) {
    GpuBlockRecorder block(0);
    block.set_vectorize(vectorize);
    for (int t = 0; t < 32; ++t) {
      for (int e = 0; e < 4; ++e) {
        block.Record(t, e, kBase + (4 * t + e) * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
        block.Record(t, 4 + e, kBase + 0x10000 + (4 * t + e) * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
      }
    }
    GpuMemoryAnalysis analysis(1);
    analysis.AddBlock(block);
    return analysis.Finish();
  };
  KernelMemoryStats merged = run(true);
  EXPECT_EQ(merged.global_loads.requests, 2);
  EXPECT_EQ(merged.global_loads.sectors, 32);
  EXPECT_EQ(merged.global_loads.ideal_sectors, 32);
  KernelMemoryStats scalar = run(false);
  EXPECT_EQ(scalar.global_loads.requests, 8);
  EXPECT_EQ(scalar.global_loads.sectors, 128);
  EXPECT_EQ(scalar.global_loads.ideal_sectors, 32);

  // Not merged: one site executed again (a loop, which the vectorizer leaves alone), a run that
  // does not start aligned to its size, and anything across a barrier.
  GpuBlockRecorder loop(0);
  loop.set_vectorize(true);
  for (int i = 0; i < 4; ++i) loop.Record(0, 0, kBase + 4 * i, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
  for (int i = 0; i < 4; ++i) loop.Record(0, 1 + i, kBase + 0x104 + 4 * i, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
  loop.Record(0, 5, kBase + 0x200, 4, GpuMemorySpace::kShared, GpuAccessKind::kStore);
  loop.Flush();
  loop.Record(0, 6, kBase + 0x204, 4, GpuMemorySpace::kShared, GpuAccessKind::kStore);
  GpuMemoryAnalysis analysis(1);
  analysis.AddBlock(loop);
  KernelMemoryStats s = analysis.Finish();
  EXPECT_EQ(s.global_loads.requests, 8);
  EXPECT_EQ(s.shared_stores.requests, 2);
}

TEST(GpuMemoryAnalysisTest, FootprintOfUnsampledBlocksKeepsDramBytesExact) {
  // A naive transpose of a 256 x 256 float matrix, a block of 256 threads per output row: block
  // b reads column b (256 sectors, one float of each) and writes row b. Every input sector is
  // shared by 8 blocks, so scaling one block's distinct sectors would count 8 times the input.
  constexpr int kN = 256;
  constexpr uint64_t kIn = 0x100000, kOut = 0x200000;
  auto block_of = [&](int64_t b, bool requests) {
    GpuBlockRecorder block(b, 32, requests);
    for (int t = 0; t < kN; ++t) {
      block.Record(t, 0, kIn + (t * kN + b) * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
      block.Record(t, 1, kOut + (b * kN + t) * 4, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kStore);
    }
    return block;
  };
  GpuMemoryAnalysis analysis(kN);
  std::vector<int64_t> sample = SampledBlocks(kN, 8);
  for (int64_t b = 0; b < kN; ++b) {
    analysis.AddBlock(block_of(b, std::binary_search(sample.begin(), sample.end(), b)));
  }
  KernelMemoryStats s = analysis.Finish();
  EXPECT_EQ(s.blocks_analysed, 8);
  EXPECT_EQ(s.blocks_footprinted, kN);
  EXPECT_EQ(s.dram_read_sectors, kN * kN * 4 / 32);
  EXPECT_EQ(s.dram_write_sectors, kN * kN * 4 / 32);
  EXPECT_EQ(s.global_loads.requests, kN * kN / 32);
  EXPECT_DOUBLE_EQ(s.global_loads.SectorsPerRequest(), 32.0);
  EXPECT_DOUBLE_EQ(s.global_stores.SectorsPerRequest(), 4.0);
}

}  // namespace
}  // namespace xlens::runtime
