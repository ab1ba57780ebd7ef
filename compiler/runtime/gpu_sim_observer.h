// GpuSimObserver: what the GPU simulator reports of a launch's memory traffic, for analyses that
// need what a profiler would measure on the hardware (coalescing, bank conflicts, DRAM bytes).
// With an observer attached to a launch, the simulator runs an instrumented copy of the kernel
// that reports every load, store and atomic of global memory (address space 1, and generic
// pointers into global memory) and of shared memory (address space 3, and generic pointers into
// the block's shared memory) before it happens.
//
// Order: KernelBegin; then for each block BlockBegin, its accesses and barriers, BlockEnd (all on
// one host thread, identified by `worker`); then KernelEnd. Within a block, the accesses of one
// GPU thread arrive in its program order; threads of a block interleave only at synchronisation
// points (barriers, shuffles, votes, warp reductions), so the k-th execution of a site by each
// lane of a warp is that warp's k-th request at the site. Blocks run one after the other unless
// the observer says it may be called from several workers at once (concurrent_blocks()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xlens::runtime {

enum class GpuMemorySpace : uint8_t { kGlobal = 1, kShared = 3 };

// One load, store or atomic instruction of a kernel (a static site), as instrumented.
struct GpuAccessSite {
  int32_t id = 0;              // index into GpuKernelLaunchInfo::sites
  std::string instruction;     // the LLVM IR instruction, one line ("%v = load float, ptr ...")
  // The space the pointer's type names: kGlobal for address space 1 and generic pointers,
  // kShared for address space 3. A generic access is reported with the space it resolves to.
  GpuMemorySpace declared_space = GpuMemorySpace::kGlobal;
  int32_t bytes = 0;
  bool store = false;
  bool atomic = false;         // atomicrmw, cmpxchg (reported once, as a store)
};

// One dynamic access by one GPU thread.
struct GpuMemoryAccess {
  int32_t site = 0;            // GpuAccessSite::id
  int32_t thread = 0;          // linear thread index within the block (tid.x here: 1-D blocks)
  // Global: the host address that stands for the device address (device pointers of the
  // simulator are host addresses). Shared: the byte offset within the block's shared memory.
  uint64_t address = 0;
  int32_t bytes = 0;
  bool store = false;
  bool atomic = false;
  GpuMemorySpace space = GpuMemorySpace::kGlobal;
};

struct GpuKernelLaunchInfo {
  std::string kernel;          // the kernel's name in its module
  int64_t blocks = 0;
  int64_t threads_per_block = 0;
  int64_t shared_memory_bytes = 0;  // static and dynamic shared memory of one block
  int32_t warp_size = 32;
  const std::vector<GpuAccessSite>* sites = nullptr;  // valid until KernelEnd
};

class GpuSimObserver {
 public:
  virtual ~GpuSimObserver() = default;
  // Whether blocks may run on several host threads at once (then every call below except
  // KernelBegin/KernelEnd may come concurrently from different `worker`s, never for one block).
  virtual bool concurrent_blocks() const { return false; }
  // Before any block runs; `workers` bounds the `worker` argument of the calls that follow.
  virtual void KernelBegin(const GpuKernelLaunchInfo& launch, int workers) {}
  virtual void BlockBegin(int worker, int64_t block) {}
  // Every access, before it happens.
  virtual void Access(int worker, int64_t block, const GpuMemoryAccess& access) = 0;
  // Every block-wide barrier, once per barrier instance, when all threads have arrived.
  virtual void Barrier(int worker, int64_t block) {}
  virtual void BlockEnd(int worker, int64_t block) {}
  virtual void KernelEnd() {}
};

}  // namespace xlens::runtime
