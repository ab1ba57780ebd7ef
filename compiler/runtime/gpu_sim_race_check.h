// SimRaceChecker: the GPU simulator's race check, an observer of every access of a launch. Two
// threads of one block race when they touch the same byte of shared or global memory with no
// barrier between, at least one of them writing and not both atomically (shadow memory per
// byte: the last writer and the last reader, with the barrier epoch of each). Races between
// blocks are not checked. The first race of a launch is kept as a message naming the block, the
// threads, the address and the two instructions.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/runtime/gpu_sim_observer.h"

namespace xlens::runtime {

class SimRaceChecker : public GpuSimObserver {
 public:
  bool concurrent_blocks() const override { return true; }
  void KernelBegin(const GpuKernelLaunchInfo& launch, int workers) override;
  void BlockBegin(int worker, int64_t block) override;
  void Access(int worker, int64_t block, const GpuMemoryAccess& access) override;
  void Barrier(int worker, int64_t block) override;

  // The first race of the last launch; empty when there was none.
  std::string race() const;

 private:
  struct Shadow {
    int32_t writer = -1, writer_site = -1;
    uint32_t write_epoch = 0;
    int32_t reader = -1, reader_site = -1;
    uint32_t read_epoch = 0;
    bool many_readers = false;
  };
  struct Worker {
    uint32_t epoch = 1;
    std::vector<Shadow> shared;
    std::unordered_map<uint64_t, Shadow> global;
  };
  void Report(int64_t block, const GpuMemoryAccess& access, uint64_t byte, int32_t other_thread, int32_t other_site,
              bool other_wrote);

  GpuKernelLaunchInfo launch_;
  std::vector<GpuAccessSite> sites_;
  std::vector<Worker> workers_;
  mutable std::mutex mu_;
  std::string race_;
};

}  // namespace xlens::runtime
