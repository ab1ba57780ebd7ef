// What the memory system would see of a kernel, counted from the GPU simulator's access reports
// (gpu_sim_observer.h) as Nsight Compute counts it: per warp-level request, the 32-byte sectors
// of global memory it touches (against the ideal: its active lanes' bytes in whole sectors), and
// for shared memory the wavefronts it needs (the most distinct 4-byte words one bank serves).
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/runtime/gpu_sim_observer.h"

namespace xlens::testing {

struct KernelMemoryCounts {
  std::string kernel;
  int64_t global_requests = 0;
  int64_t global_sectors = 0;
  int64_t global_ideal_sectors = 0;
  int64_t shared_requests = 0;
  int64_t shared_wavefronts = 0;

  double SectorsPerRequest() const {
    return global_requests == 0 ? 0 : static_cast<double>(global_sectors) / global_requests;
  }
  // Sectors over the ideal: 1 is perfectly coalesced.
  double SectorsOverIdeal() const {
    return global_ideal_sectors == 0 ? 0 : static_cast<double>(global_sectors) / global_ideal_sectors;
  }
  // Wavefronts per shared request: 1 is free of bank conflicts.
  double SharedWavefrontsPerRequest() const {
    return shared_requests == 0 ? 0 : static_cast<double>(shared_wavefronts) / shared_requests;
  }
};

class MemoryCounter : public runtime::GpuSimObserver {
 public:
  const std::vector<KernelMemoryCounts>& kernels() const { return kernels_; }

  void KernelBegin(const runtime::GpuKernelLaunchInfo& launch, int) override {
    kernels_.push_back({launch.kernel});
  }
  void BlockBegin(int, int64_t) override {
    executions_.clear();
    requests_.clear();
  }
  void Access(int, int64_t, const runtime::GpuMemoryAccess& a) override {
    // The k-th execution of a site by each lane of a warp is the warp's k-th request there.
    const int64_t k = executions_[{a.site, a.thread}]++;
    Request& r = requests_[{a.thread / 32, a.site, k}];
    r.shared = a.space == runtime::GpuMemorySpace::kShared;
    r.lanes += 1;
    r.bytes = a.bytes;
    for (uint64_t byte = a.address; byte < a.address + a.bytes; byte += r.shared ? 4 : 1) {
      if (r.shared) {
        r.words.insert(byte / 4);
      } else {
        r.sectors.insert(byte / 32);
      }
    }
  }
  void BlockEnd(int, int64_t) override {
    KernelMemoryCounts& c = kernels_.back();
    for (const auto& [key, r] : requests_) {
      if (r.shared) {
        std::map<uint64_t, int64_t> per_bank;
        for (uint64_t word : r.words) ++per_bank[word % 32];
        int64_t most = 1;
        for (const auto& [bank, n] : per_bank) most = std::max(most, n);
        ++c.shared_requests;
        c.shared_wavefronts += most;
      } else {
        ++c.global_requests;
        c.global_sectors += static_cast<int64_t>(r.sectors.size());
        c.global_ideal_sectors += (r.lanes * r.bytes + 31) / 32;
      }
    }
  }

 private:
  struct Request {
    bool shared = false;
    int64_t lanes = 0;
    int64_t bytes = 0;
    std::set<uint64_t> sectors;
    std::set<uint64_t> words;
  };
  std::vector<KernelMemoryCounts> kernels_;
  std::map<std::pair<int32_t, int32_t>, int64_t> executions_;
  std::map<std::tuple<int32_t, int32_t, int64_t>, Request> requests_;
};

}  // namespace xlens::testing
