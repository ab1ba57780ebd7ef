#include "compiler/runtime/gpu_sim_race_check.h"

#include <fmt/format.h>

namespace xlens::runtime {

void SimRaceChecker::KernelBegin(const GpuKernelLaunchInfo& launch, int workers) {
  launch_ = launch;
  sites_ = launch.sites ? *launch.sites : std::vector<GpuAccessSite>{};
  launch_.sites = nullptr;
  workers_.assign(workers, Worker{});
  std::lock_guard<std::mutex> lock(mu_);
  race_.clear();
}

void SimRaceChecker::BlockBegin(int worker, int64_t block) {
  Worker& w = workers_[worker];
  w.epoch = 1;
  w.shared.assign(launch_.shared_memory_bytes, Shadow{});
  w.global.clear();
}

void SimRaceChecker::Barrier(int worker, int64_t block) { ++workers_[worker].epoch; }

void SimRaceChecker::Report(int64_t block, const GpuMemoryAccess& access, uint64_t byte, int32_t other_thread,
                            int32_t other_site, bool other_wrote) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!race_.empty()) return;
  auto site = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(sites_.size()) ? sites_[id].instruction : std::string("?");
  };
  const std::string where = access.space == GpuMemorySpace::kShared ? fmt::format("shared memory offset {}", byte)
                                                                    : fmt::format("global address {:#x}", byte);
  race_ = fmt::format("data race in kernel {}, block {}: thread {} {} {} and thread {} {} it with no barrier "
                      "between (`{}` and `{}`)",
                      launch_.kernel, block, other_thread, other_wrote ? "writes" : "reads", where, access.thread,
                      access.store ? "writes" : "reads", site(other_site), site(access.site));
}

void SimRaceChecker::Access(int worker, int64_t block, const GpuMemoryAccess& access) {
  if (access.atomic) return;
  Worker& w = workers_[worker];
  for (int32_t i = 0; i < access.bytes; ++i) {
    const uint64_t byte = access.address + i;
    Shadow* s;
    if (access.space == GpuMemorySpace::kShared) {
      if (byte >= w.shared.size()) return;  // outside the block's shared memory: not ours to judge
      s = &w.shared[byte];
    } else {
      s = &w.global[byte];
    }
    const int32_t t = access.thread;
    if (s->write_epoch == w.epoch && s->writer != t && s->writer >= 0) {
      Report(block, access, byte, s->writer, s->writer_site, true);
      return;
    }
    if (access.store) {
      if (s->read_epoch == w.epoch && s->reader >= 0 && (s->reader != t || s->many_readers)) {
        Report(block, access, byte, s->reader, s->reader_site, false);
        return;
      }
      s->writer = t;
      s->writer_site = access.site;
      s->write_epoch = w.epoch;
    } else {
      if (s->read_epoch == w.epoch && s->reader != t) s->many_readers = true;
      if (s->read_epoch != w.epoch) s->many_readers = false;
      s->reader = t;
      s->reader_site = access.site;
      s->read_epoch = w.epoch;
    }
  }
}

std::string SimRaceChecker::race() const {
  std::lock_guard<std::mutex> lock(mu_);
  return race_;
}

}  // namespace xlens::runtime
