// GpuMemoryAnalysis: what Nsight Compute's memory workload section would report for one kernel
// launch, computed from the stream of memory accesses its threads make (the GPU simulator feeds
// it; tests feed it synthetic streams).
//
// The accesses of a warp's lanes at the same static site (a load or store instruction) and the
// same dynamic instance (the n-th time each lane executes that site) form one warp-level request,
// as the hardware's coalescer forms them from a warp instruction:
//  - global memory: the request touches the distinct 32-byte sectors of its lanes' byte ranges;
//    the ideal is the sectors its distinct bytes would fill (4 for f32 by a full warp, 1 for a
//    broadcast). Bytes moved from DRAM are the distinct sectors the whole launch touches, read
//    and written counted apart (every sector once: a cache that holds the working set).
//  - shared memory (32 banks of 4 bytes): a request takes as many wavefronts as the most distinct
//    4-byte words any bank must serve (the same word to many lanes is a broadcast), at least one
//    per 128 bytes; bank conflicts are the wavefronts above that ideal.
//
// Blocks are recorded independently (the simulator runs them in parallel), each into its own
// BlockRecorder, then merged. Where analysing every block would be slow, SampledBlocks picks a
// deterministic subset whose requests are analysed and Finish scales their counts up by
// total/analysed, saying so; the other blocks are still recorded for their footprint (the sectors
// they touch, cheap to keep), so the DRAM bytes stay exact even where blocks share sectors (a
// transpose's blocks each use a slice of every sector they read).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/runtime/gpu_sim_observer.h"  // GpuMemorySpace

namespace xlens::runtime {

enum class GpuAccessKind : uint8_t { kLoad, kStore, kAtomic };

// Requests and sectors of one kind of global access.
struct GlobalAccessCounts {
  int64_t requests = 0;       // warp-level requests
  int64_t sectors = 0;        // 32-byte sectors they touch, each request counted apart
  int64_t ideal_sectors = 0;  // the sectors their distinct bytes would fill
  int64_t lane_accesses = 0;  // thread-level accesses (active lanes summed over requests)
  int64_t bytes = 0;          // bytes the threads asked for
  // Sectors per request (0 without requests); 4 is ideal for f32 by a full warp.
  double SectorsPerRequest() const;
};

struct SharedAccessCounts {
  int64_t requests = 0;
  int64_t wavefronts = 0;        // passes through the 32 banks
  int64_t ideal_wavefronts = 0;  // one per 128 distinct bytes, at least one per request
  int64_t bank_conflicts() const { return wavefronts - ideal_wavefronts; }
};

struct KernelMemoryStats {
  GlobalAccessCounts global_loads;
  GlobalAccessCounts global_stores;  // atomics count here and in dram_read_sectors
  SharedAccessCounts shared_loads;
  SharedAccessCounts shared_stores;
  int64_t dram_read_sectors = 0;   // distinct sectors read
  int64_t dram_write_sectors = 0;  // distinct sectors written
  int64_t blocks = 0;              // blocks of the launch
  int64_t blocks_analysed = 0;     // blocks whose requests were analysed (scaled up to `blocks`)
  int64_t blocks_footprinted = 0;  // blocks whose sectors were recorded (DRAM bytes scaled up)

  int64_t dram_bytes() const { return 32 * (dram_read_sectors + dram_write_sectors); }
  // Every sector every request touched, loads and stores: the traffic between L2 and the SMs.
  int64_t l2_sector_bytes() const { return 32 * (global_loads.sectors + global_stores.sectors); }
  int64_t ideal_l2_sector_bytes() const {
    return 32 * (global_loads.ideal_sectors + global_stores.ideal_sectors);
  }
  bool sampled() const { return blocks_analysed < blocks; }
};

// The accesses of one block, in any order across threads (threads may run one after another, as
// fibers do); each thread's own accesses in program order.
class GpuBlockRecorder {
 public:
  // With `requests` false, only the global sectors the block touches are kept (its footprint).
  GpuBlockRecorder(int64_t block, int32_t warp_size = 32, bool requests = true)
      : block_(block), warp_size_(warp_size), requests_(requests) {}
  // One thread-level access: `thread` is the thread's linear index in the block, `site` names the
  // static instruction (the same number for every thread). The dynamic instance is counted here.
  void Record(int32_t thread, int32_t site, uint64_t address, int32_t bytes, GpuMemorySpace space,
              GpuAccessKind kind);
  // As Record, with the dynamic instance given by the caller (it already counts them).
  void RecordInstance(int32_t thread, int32_t site, int64_t instance, uint64_t address,
                      int32_t bytes, GpuMemorySpace space, GpuAccessKind kind);
  int64_t block() const { return block_; }
  bool records_requests() const { return requests_; }
  // Merges what LLVM's load/store vectorizer merges when the NVPTX back end compiles the IR the
  // simulator runs (emitters write a 128-bit load as four scalar loads and leave the merging to
  // it): accesses by one thread at distinct sites, of one kind and space, contiguous, together 8
  // or 16 bytes and aligned to that, with no barrier between them, become one access at the
  // first one's site. Off by default (synthetic streams say what they mean).
  void set_vectorize(bool on) { vectorize_ = on; }
  // A block-wide barrier: nothing is merged across it. AddBlock flushes too.
  void Flush() const;
  size_t size() const { return accesses_.size(); }

 private:
  friend class GpuMemoryAnalysis;
  struct Access {
    uint64_t address;
    int64_t instance;
    int32_t site;
    int32_t warp;
    int32_t bytes;
    GpuMemorySpace space;
    GpuAccessKind kind;
  };
  // Accesses of one thread waiting to be merged (see set_vectorize).
  struct Chain {
    Access elements[4];
    int count = 0;
    int32_t bytes = 0;
    int64_t opened = 0;
  };
  struct ThreadChains {
    Chain chains[4];
    int open = 0;
  };
  void Stage(int32_t thread, const Access& access);
  void Emit(const Chain& chain) const;

  int64_t block_;
  int32_t warp_size_;
  bool requests_;
  bool vectorize_ = false;
  int64_t staged_ = 0;
  mutable std::vector<ThreadChains> pending_;  // per thread
  mutable std::vector<Access> accesses_;
  std::vector<uint64_t> footprint_reads_;   // sectors, footprint-only mode
  std::vector<uint64_t> footprint_writes_;
  std::vector<int64_t> instance_counts_;  // [thread * sites + site], grown on demand
  int32_t sites_ = 0;
};

// Merges blocks into one launch's statistics. Thread-safe: blocks may be added concurrently.
class GpuMemoryAnalysis {
 public:
  explicit GpuMemoryAnalysis(int64_t blocks) : blocks_(blocks) {}
  // Turns a block's accesses into requests and sectors and merges them in.
  void AddBlock(const GpuBlockRecorder& block);
  // The launch's statistics. When fewer blocks had their requests analysed than the launch has,
  // the request counts are scaled by blocks / analysed; when fewer had their footprint recorded
  // (every block recorder keeps it), the distinct sectors are scaled likewise, which assumes
  // blocks touch disjoint data.
  KernelMemoryStats Finish();

 private:
  // A set of sector numbers as a bitmap of 128 KiB pages (4096 sectors), allocated as touched.
  class SectorSet {
   public:
    void Insert(const std::vector<uint64_t>& sorted_unique);
    int64_t size() const;

   private:
    std::unordered_map<uint64_t, std::unique_ptr<std::array<uint64_t, 64>>> pages_;
  };
  std::mutex mu_;
  int64_t blocks_;
  KernelMemoryStats stats_;
  SectorSet read_sectors_;
  SectorSet write_sectors_;
};

// The blocks to analyse of a launch of `blocks` when at most `limit` may be: all of them when
// they fit, else `limit` blocks spread evenly from the first to the last (deterministic).
std::vector<int64_t> SampledBlocks(int64_t blocks, int64_t limit);

}  // namespace xlens::runtime
