#include "compiler/runtime/gpu_memory_analysis.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace xlens::runtime {

namespace {

constexpr uint64_t kSectorBytes = 32;
constexpr uint64_t kBankBytes = 4;
constexpr uint64_t kBanks = 32;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void SortUnique(std::vector<uint64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// Bytes covered by the union of [start, end) ranges (sorted in place).
int64_t UnionBytes(std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  int64_t total = 0;
  uint64_t covered_to = 0;
  bool any = false;
  for (const auto& [start, end] : ranges) {
    uint64_t from = any ? std::max(start, covered_to) : start;
    if (end > from) total += static_cast<int64_t>(end - from);
    covered_to = any ? std::max(covered_to, end) : end;
    any = true;
  }
  return total;
}

}  // namespace

double GlobalAccessCounts::SectorsPerRequest() const {
  return requests > 0 ? static_cast<double>(sectors) / static_cast<double>(requests) : 0.0;
}

void GpuBlockRecorder::Record(int32_t thread, int32_t site, uint64_t address, int32_t bytes,
                              GpuMemorySpace space, GpuAccessKind kind) {
  if (!requests_) return RecordInstance(thread, site, 0, address, bytes, space, kind);
  if (site >= sites_) {
    // Re-layout the per-thread counters for the larger number of sites (rare: sites are few and
    // usually all met by the first thread).
    const int32_t sites = std::max(site + 1, sites_ * 2);
    const int64_t threads = sites_ > 0 ? static_cast<int64_t>(instance_counts_.size()) / sites_ : 0;
    std::vector<int64_t> grown(static_cast<size_t>(threads * sites), 0);
    for (int64_t t = 0; t < threads; ++t) {
      std::copy_n(instance_counts_.begin() + t * sites_, sites_, grown.begin() + t * sites);
    }
    instance_counts_ = std::move(grown);
    sites_ = sites;
  }
  const size_t needed = static_cast<size_t>(thread + 1) * static_cast<size_t>(sites_);
  if (instance_counts_.size() < needed) instance_counts_.resize(needed, 0);
  int64_t& count = instance_counts_[static_cast<size_t>(thread) * sites_ + site];
  RecordInstance(thread, site, count++, address, bytes, space, kind);
}

void GpuBlockRecorder::RecordInstance(int32_t thread, int32_t site, int64_t instance,
                                      uint64_t address, int32_t bytes, GpuMemorySpace space,
                                      GpuAccessKind kind) {
  if (!requests_) {
    if (space != GpuMemorySpace::kGlobal) return;
    const uint64_t last = (address + static_cast<uint64_t>(std::max(bytes, 1)) - 1) / kSectorBytes;
    for (uint64_t sector = address / kSectorBytes; sector <= last; ++sector) {
      if (kind != GpuAccessKind::kStore) footprint_reads_.push_back(sector);
      if (kind != GpuAccessKind::kLoad) footprint_writes_.push_back(sector);
    }
    return;
  }
  const Access access{address, instance, site, thread / warp_size_, std::max(bytes, 1), space, kind};
  if (vectorize_) {
    Stage(thread, access);
  } else {
    accesses_.push_back(access);
  }
}

void GpuBlockRecorder::Stage(int32_t thread, const Access& a) {
  if (static_cast<size_t>(thread) >= pending_.size()) pending_.resize(static_cast<size_t>(thread) + 1);
  ThreadChains& t = pending_[thread];
  for (int c = 0; c < t.open; ++c) {
    Chain& chain = t.chains[c];
    const Access& last = chain.elements[chain.count - 1];
    bool distinct_site = true;
    for (int e = 0; e < chain.count; ++e) distinct_site &= chain.elements[e].site != a.site;
    if (distinct_site && last.kind == a.kind && last.space == a.space &&
        last.address + static_cast<uint64_t>(last.bytes) == a.address &&
        a.bytes == chain.elements[0].bytes && chain.bytes + a.bytes <= 16 && chain.count < 4) {
      chain.elements[chain.count++] = a;
      chain.bytes += a.bytes;
      if (chain.bytes == 16) {
        Emit(chain);
        t.chains[c] = t.chains[--t.open];
      }
      return;
    }
  }
  if (t.open == 4) {
    // The oldest chain will not grow any more.
    int oldest = 0;
    for (int c = 1; c < t.open; ++c) {
      if (t.chains[c].opened < t.chains[oldest].opened) oldest = c;
    }
    Emit(t.chains[oldest]);
    t.chains[oldest] = t.chains[--t.open];
  }
  Chain& chain = t.chains[t.open++];
  chain.elements[0] = a;
  chain.count = 1;
  chain.bytes = a.bytes;
  chain.opened = staged_++;
}

void GpuBlockRecorder::Emit(const Chain& chain) const {
  const Access& first = chain.elements[0];
  if (chain.count > 1 && (chain.bytes == 8 || chain.bytes == 16) && first.address % chain.bytes == 0) {
    Access merged = first;
    merged.bytes = chain.bytes;
    accesses_.push_back(merged);
    return;
  }
  for (int e = 0; e < chain.count; ++e) accesses_.push_back(chain.elements[e]);
}

void GpuBlockRecorder::Flush() const {
  for (ThreadChains& t : pending_) {
    // Oldest first, as they were opened (the order only matters to nobody, but stays stable).
    std::sort(t.chains, t.chains + t.open, [](const Chain& a, const Chain& b) { return a.opened < b.opened; });
    for (int c = 0; c < t.open; ++c) Emit(t.chains[c]);
    t.open = 0;
  }
}

void GpuMemoryAnalysis::SectorSet::Insert(const std::vector<uint64_t>& sectors) {
  std::array<uint64_t, 64>* page = nullptr;
  uint64_t page_number = ~uint64_t{0};
  for (uint64_t sector : sectors) {
    if (sector >> 12 != page_number) {
      page_number = sector >> 12;
      auto& slot = pages_[page_number];
      if (slot == nullptr) slot = std::make_unique<std::array<uint64_t, 64>>();
      page = slot.get();
    }
    const uint64_t bit = sector & 4095;
    (*page)[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
}

int64_t GpuMemoryAnalysis::SectorSet::size() const {
  int64_t count = 0;
  for (const auto& [number, page] : pages_) {
    for (uint64_t word : *page) count += __builtin_popcountll(word);
  }
  return count;
}

void GpuMemoryAnalysis::AddBlock(const GpuBlockRecorder& block) {
  if (!block.requests_) {
    std::vector<uint64_t> reads = block.footprint_reads_, writes = block.footprint_writes_;
    SortUnique(reads);
    SortUnique(writes);
    std::lock_guard<std::mutex> lock(mu_);
    read_sectors_.Insert(reads);
    write_sectors_.Insert(writes);
    stats_.blocks_footprinted += 1;
    return;
  }
  using Access = GpuBlockRecorder::Access;
  block.Flush();
  const std::vector<Access>& accesses = block.accesses_;
  std::vector<uint32_t> order(accesses.size());
  std::iota(order.begin(), order.end(), 0u);
  auto key = [&](uint32_t i) {
    const Access& a = accesses[i];
    return std::make_tuple(a.site, a.instance, a.warp);
  };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });

  KernelMemoryStats local;
  std::vector<uint64_t> reads, writes;
  std::vector<uint64_t> units;  // sectors or words of one request
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<int32_t> per_bank(kBanks);
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin + 1;
    while (end < order.size() && key(order[end]) == key(order[begin])) ++end;
    const Access& first = accesses[order[begin]];
    const uint64_t unit = first.space == GpuMemorySpace::kGlobal ? kSectorBytes : kBankBytes;
    units.clear();
    ranges.clear();
    int64_t bytes = 0;
    for (size_t i = begin; i < end; ++i) {
      const Access& a = accesses[order[i]];
      const uint64_t last = a.address + static_cast<uint64_t>(a.bytes) - 1;
      for (uint64_t u = a.address / unit; u <= last / unit; ++u) units.push_back(u);
      ranges.emplace_back(a.address, a.address + static_cast<uint64_t>(a.bytes));
      bytes += a.bytes;
    }
    SortUnique(units);
    const int64_t distinct_bytes = UnionBytes(ranges);
    const int64_t lanes = static_cast<int64_t>(end - begin);
    if (first.space == GpuMemorySpace::kGlobal) {
      GlobalAccessCounts& counts =
          first.kind == GpuAccessKind::kLoad ? local.global_loads : local.global_stores;
      counts.requests += 1;
      counts.sectors += static_cast<int64_t>(units.size());
      counts.ideal_sectors += CeilDiv(distinct_bytes, kSectorBytes);
      counts.lane_accesses += lanes;
      counts.bytes += bytes;
      if (first.kind != GpuAccessKind::kStore) reads.insert(reads.end(), units.begin(), units.end());
      if (first.kind != GpuAccessKind::kLoad) writes.insert(writes.end(), units.begin(), units.end());
    } else {
      SharedAccessCounts& counts =
          first.kind == GpuAccessKind::kLoad ? local.shared_loads : local.shared_stores;
      std::fill(per_bank.begin(), per_bank.end(), 0);
      int32_t busiest = 0;
      for (uint64_t word : units) busiest = std::max(busiest, ++per_bank[word % kBanks]);
      const int64_t ideal = std::max<int64_t>(1, CeilDiv(static_cast<int64_t>(units.size()), kBanks));
      counts.requests += 1;
      counts.wavefronts += std::max<int64_t>(busiest, ideal);
      counts.ideal_wavefronts += ideal;
    }
    begin = end;
  }
  SortUnique(reads);
  SortUnique(writes);

  std::lock_guard<std::mutex> lock(mu_);
  auto add_global = [](GlobalAccessCounts& into, const GlobalAccessCounts& from) {
    into.requests += from.requests;
    into.sectors += from.sectors;
    into.ideal_sectors += from.ideal_sectors;
    into.lane_accesses += from.lane_accesses;
    into.bytes += from.bytes;
  };
  auto add_shared = [](SharedAccessCounts& into, const SharedAccessCounts& from) {
    into.requests += from.requests;
    into.wavefronts += from.wavefronts;
    into.ideal_wavefronts += from.ideal_wavefronts;
  };
  add_global(stats_.global_loads, local.global_loads);
  add_global(stats_.global_stores, local.global_stores);
  add_shared(stats_.shared_loads, local.shared_loads);
  add_shared(stats_.shared_stores, local.shared_stores);
  stats_.blocks_analysed += 1;
  stats_.blocks_footprinted += 1;
  read_sectors_.Insert(reads);
  write_sectors_.Insert(writes);
}

KernelMemoryStats GpuMemoryAnalysis::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  KernelMemoryStats out = stats_;
  out.blocks = std::max({blocks_, stats_.blocks_analysed, stats_.blocks_footprinted});
  out.dram_read_sectors = read_sectors_.size();
  out.dram_write_sectors = write_sectors_.size();
  auto scale_by = [](int64_t& v, double scale) {
    v = static_cast<int64_t>(std::llround(static_cast<double>(v) * scale));
  };
  if (out.blocks_footprinted > 0 && out.blocks_footprinted < out.blocks) {
    const double scale = static_cast<double>(out.blocks) / static_cast<double>(out.blocks_footprinted);
    scale_by(out.dram_read_sectors, scale);
    scale_by(out.dram_write_sectors, scale);
  }
  if (out.blocks_analysed > 0 && out.blocks_analysed < out.blocks) {
    const double scale = static_cast<double>(out.blocks) / static_cast<double>(out.blocks_analysed);
    auto scaled = [&](int64_t& v) { scale_by(v, scale); };
    for (GlobalAccessCounts* g : {&out.global_loads, &out.global_stores}) {
      scaled(g->requests);
      scaled(g->sectors);
      scaled(g->ideal_sectors);
      scaled(g->lane_accesses);
      scaled(g->bytes);
    }
    for (SharedAccessCounts* s : {&out.shared_loads, &out.shared_stores}) {
      scaled(s->requests);
      scaled(s->wavefronts);
      scaled(s->ideal_wavefronts);
    }
  }
  return out;
}

std::vector<int64_t> SampledBlocks(int64_t blocks, int64_t limit) {
  std::vector<int64_t> out;
  if (blocks <= 0) return out;
  if (limit <= 0 || blocks <= limit) {
    out.resize(static_cast<size_t>(blocks));
    std::iota(out.begin(), out.end(), int64_t{0});
    return out;
  }
  if (limit == 1) return {0};
  for (int64_t i = 0; i < limit; ++i) {
    // Evenly spaced from 0 to blocks - 1, both ends included; strictly increasing since
    // blocks > limit.
    out.push_back(i * (blocks - 1) / (limit - 1));
  }
  return out;
}

}  // namespace xlens::runtime
