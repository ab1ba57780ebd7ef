#include "profiler/hlo_profile.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"

namespace xlens::profiler {

namespace {

// "2.10 MB", "512 B": decimal units, as bandwidth is quoted in GB/s.
std::string HumanBytes(double bytes) {
  if (bytes <= 0) return "-";
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} {}", bytes, units[unit])
                   : fmt::format("{:.2f} {}", bytes, units[unit]);
}

std::string HumanCount(double count) {
  if (count <= 0) return "-";
  const char* units[] = {"", "k", "M", "G", "T"};
  int unit = 0;
  while (count >= 1000 && unit < 4) {
    count /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f}", count) : fmt::format("{:.2f}{}", count, units[unit]);
}

std::string HumanTime(double ns) {
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.2f} us", ns / 1e3);
}

}  // namespace

std::string FormatHloProfile(const HloProfile& profile) {
  std::vector<const HloProfileEntry*> rows;
  for (const auto& entry : profile.entries) rows.push_back(&entry);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return a->total_ns > b->total_ns;
  });
  const double runs = static_cast<double>(std::max<int64_t>(1, profile.runs));
  double total_ns = 0, total_bytes = 0, total_flops = 0;
  for (const auto* row : rows) {
    total_ns += row->total_ns / runs;
    total_bytes += row->bytes_accessed;
    total_flops += row->flops + row->transcendentals;
  }
  const bool with_peak = profile.peak_bandwidth_gbps > 0;
  const bool with_gpu = std::any_of(rows.begin(), rows.end(), [](const auto* r) { return r->has_gpu_analysis; });
  const bool predicted = !profile.predicted_for.empty();
  const bool with_source = std::any_of(rows.begin(), rows.end(), [](const auto* r) { return !r->source.empty(); });
  // The kernel column is padded to its widest row when a source column follows it.
  auto kernel_text = [](const HloProfileEntry& row) {
    return row.kind.empty() ? row.name : fmt::format("{} ({})", row.name, row.kind);
  };
  size_t kernel_width = 0;
  for (const auto* row : rows) kernel_width = std::max(kernel_width, kernel_text(*row).size());
  auto kernel_cell = [&](const std::string& kernel, const std::string& source) {
    if (!with_source) return kernel;
    return fmt::format("{:<{}}  {}", kernel, kernel_width, source.empty() ? "-" : source);
  };
  std::string out = fmt::format(
      "Execution profile for {}: {} per run over {} run{}, {} kernels and calls{}\n", profile.module,
      HumanTime(total_ns), profile.runs, profile.runs == 1 ? "" : "s", rows.size(),
      predicted ? fmt::format(" (times predicted for {}, not measured)", profile.predicted_for) : "");
  if (with_peak) {
    out += fmt::format("Peak memory bandwidth ({}): {:.1f} GB/s\n",
                       predicted ? "a device copy on the target" : "copy loop, this machine",
                       profile.peak_bandwidth_gbps);
  }
  if (profile.limits != nullptr) {
    out += fmt::format("Machine limits ({}): {}\n", profile.limits->origin, profile.limits->Summary());
  }
  // The floor the limits put under a row's time (ns per run) and which limit it is.
  auto bound = [&](double bytes, double flops) -> std::pair<double, std::string> {
    if (profile.limits == nullptr) return {0, ""};
    const MachineLimits& limits = *profile.limits;
    const double gbps = bytes > 0 ? limits.BandwidthGBps(bytes) : 0;
    const double memory_ns = gbps > 0 ? bytes / gbps : 0;
    const double compute_ns = limits.peak_gflops > 0 ? flops / limits.peak_gflops : 0;
    if (memory_ns <= 0 && compute_ns <= 0) return {0, "-"};
    return compute_ns > memory_ns ? std::pair<double, std::string>{compute_ns, "FMA"}
                                  : std::pair<double, std::string>{memory_ns, limits.LevelOf(bytes)};
  };
  const bool with_bound = profile.limits != nullptr;
  auto bound_cells = [&](double ns, double floor_ns, const std::string& limit) {
    if (!with_bound) return std::string();
    if (floor_ns <= 0 || ns <= 0) return fmt::format(" {:>7} {:<5}", "-", "-");
    return fmt::format(" {:>6.1f}% {:<5}", 100.0 * floor_ns / ns, limit);
  };
  const std::string gpu_header =
      with_gpu ? fmt::format(" {:>8} {:>10} {:>5} {:>8} {:>11}", "sect/req", "DRAM", "occ", "bkconf", "bound") : "";
  out += fmt::format("{:>12} {:>7} {:>7} {:>10} {:>10} {:>8} {:>8}{}{}{}  {}\n", "time/run", "%",
                     "cum%", "bytes", "flops", "GB/s", "GFLOP/s", with_peak ? " %peakBW" : "",
                     with_bound ? fmt::format(" {:>7} {:<5}", "%bound", "limit") : "", gpu_header,
                     kernel_cell("kernel", "source"));
  double total_floor_ns = 0;
  double cumulative = 0;
  for (const auto* row : rows) {
    double ns = row->total_ns / runs;
    cumulative += ns;
    double share = total_ns > 0 ? 100.0 * ns / total_ns : 0;
    double cumulative_share = total_ns > 0 ? 100.0 * cumulative / total_ns : 0;
    double gbps = ns > 0 ? row->bytes_accessed / ns : 0;  // bytes per ns is GB/s
    double gflops = ns > 0 ? (row->flops + row->transcendentals) / ns : 0;
    std::string peak;
    if (with_peak) {
      peak = gbps > 0 ? fmt::format(" {:>7.1f}%", 100.0 * gbps / profile.peak_bandwidth_gbps)
                      : fmt::format(" {:>8}", "-");
    }
    std::string gpu;
    if (with_gpu && row->has_gpu_analysis) {
      const HloProfileEntry::GpuAnalysis& g = row->gpu;
      gpu = fmt::format(" {:>8} {:>10} {:>4.0f}% {:>8} {:>11}",
                        g.sectors_per_request > 0 ? fmt::format("{:.2f}", g.sectors_per_request) : "-",
                        HumanBytes(g.dram_bytes), 100 * g.occupancy, g.bank_conflicts, g.bound);
    } else if (with_gpu) {
      gpu = fmt::format(" {:>8} {:>10} {:>5} {:>8} {:>11}", "-", "-", "-", "-", "-");
    }
    const auto [floor_ns, limit] = bound(row->bytes_accessed, row->flops);
    total_floor_ns += floor_ns;
    out += fmt::format("{:>12} {:>6.1f}% {:>6.1f}% {:>10} {:>10} {:>8} {:>8}{}{}{}  {}\n",
                       HumanTime(ns), share, cumulative_share, HumanBytes(row->bytes_accessed),
                       HumanCount(row->flops + row->transcendentals),
                       gbps > 0 ? fmt::format("{:.2f}", gbps) : "-",
                       gflops > 0 ? fmt::format("{:.2f}", gflops) : "-", peak,
                       bound_cells(ns, floor_ns, limit), gpu, kernel_cell(kernel_text(*row), row->source));
  }
  double gbps = total_ns > 0 ? total_bytes / total_ns : 0;
  out += fmt::format("{:>12} {:>6.1f}% {:>7} {:>10} {:>10} {:>8} {:>8}{}{}{}  total\n",
                     HumanTime(total_ns), total_ns > 0 ? 100.0 : 0.0, "", HumanBytes(total_bytes),
                     HumanCount(total_flops), gbps > 0 ? fmt::format("{:.2f}", gbps) : "-",
                     total_ns > 0 && total_flops > 0 ? fmt::format("{:.2f}", total_flops / total_ns) : "-",
                     with_peak && gbps > 0
                         ? fmt::format(" {:>7.1f}%", 100.0 * gbps / profile.peak_bandwidth_gbps)
                         : (with_peak ? fmt::format(" {:>8}", "-") : ""),
                     bound_cells(total_ns, total_floor_ns, ""), std::string(with_gpu ? gpu_header.size() : 0, ' '));
  return out;
}

double PeakMemoryBandwidthGBps() {
  static const double measured = [] {
    // Big enough to leave every cache, small enough to take a few tenths of a second.
    constexpr size_t kBytes = size_t{64} << 20;
    auto source = std::make_unique<char[]>(kBytes);
    auto destination = std::make_unique<char[]>(kBytes);
    std::memset(source.get(), 1, kBytes);
    std::memset(destination.get(), 0, kBytes);  // fault the pages in before timing
    ThreadPool& pool = ThreadPool::Default();
    constexpr int64_t kChunks = 256;
    constexpr size_t kChunkBytes = kBytes / kChunks;
    double best = 0;
    for (int attempt = 0; attempt < 10; ++attempt) {
      int64_t start = NowNs();
      pool.ParallelFor(kChunks, 1, [&](int64_t begin, int64_t end) {
        std::memcpy(destination.get() + begin * kChunkBytes, source.get() + begin * kChunkBytes,
                    (end - begin) * kChunkBytes);
      });
      int64_t ns = std::max<int64_t>(1, NowNs() - start);
      best = std::max(best, 2.0 * kBytes / ns);
    }
    return best;
  }();
  return measured;
}

}  // namespace xlens::profiler
