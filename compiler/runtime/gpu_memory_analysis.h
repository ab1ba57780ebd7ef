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
// deterministic subset and Finish scales the counts up by total/analysed, saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xlens::runtime {

enum class GpuMemorySpace : uint8_t { kGlobal, kShared };
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
  int64_t blocks_analysed = 0;     // blocks whose accesses were recorded (scaled up to `blocks`)

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
  GpuBlockRecorder(int64_t block, int32_t warp_size = 32) : block_(block), warp_size_(warp_size) {}
  // One thread-level access: `thread` is the thread's linear index in the block, `site` names the
  // static instruction (the same number for every thread). The dynamic instance is counted here.
  void Record(int32_t thread, int32_t site, uint64_t address, int32_t bytes, GpuMemorySpace space,
              GpuAccessKind kind);
  // As Record, with the dynamic instance given by the caller (it already counts them).
  void RecordInstance(int32_t thread, int32_t site, int64_t instance, uint64_t address,
                      int32_t bytes, GpuMemorySpace space, GpuAccessKind kind);
  int64_t block() const { return block_; }
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
  int64_t block_;
  int32_t warp_size_;
  std::vector<Access> accesses_;
  std::vector<int64_t> instance_counts_;  // [thread * sites + site], grown on demand
  int32_t sites_ = 0;
};

// Merges blocks into one launch's statistics. Thread-safe: blocks may be added concurrently.
class GpuMemoryAnalysis {
 public:
  explicit GpuMemoryAnalysis(int64_t blocks) : blocks_(blocks) {}
  // Turns a block's accesses into requests and sectors and merges them in.
  void AddBlock(const GpuBlockRecorder& block);
  // The launch's statistics; when fewer blocks were added than the launch has, the counts are
  // scaled by blocks / analysed (the distinct sectors too, which assumes blocks touch disjoint
  // data, as the emitters' blocks do).
  KernelMemoryStats Finish();

 private:
  struct Partial;
  std::mutex mu_;
  int64_t blocks_;
  KernelMemoryStats stats_;
  std::vector<uint64_t> read_sectors_;
  std::vector<uint64_t> write_sectors_;
};

// The blocks to analyse of a launch of `blocks` when at most `limit` may be: all of them when
// they fit, else `limit` blocks spread evenly from the first to the last (deterministic).
std::vector<int64_t> SampledBlocks(int64_t blocks, int64_t limit);

}  // namespace xlens::runtime
