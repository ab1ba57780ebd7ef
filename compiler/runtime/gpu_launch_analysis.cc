#include "compiler/runtime/gpu_launch_analysis.h"

#include <fmt/format.h>

namespace xlens::runtime {

namespace {

std::string Bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 3) {
    bytes /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} {}", bytes, units[unit]) : fmt::format("{:.2f} {}", bytes, units[unit]);
}

std::string Time(double ns) {
  return ns >= 1e6 ? fmt::format("{:.3f} ms", ns / 1e6) : fmt::format("{:.2f} us", ns / 1e3);
}

std::string PerRequest(const GlobalAccessCounts& c) {
  return c.requests > 0 ? fmt::format("{:.2f}", c.SectorsPerRequest()) : "-";
}

}  // namespace

void PredictLaunch(const GpuTarget& target, GpuLaunchAnalysis& launch) {
  KernelWorkload w;
  w.blocks = launch.dims.blocks;
  w.threads_per_block = launch.dims.threads_per_block;
  w.registers_per_thread = launch.resources.registers;
  w.shared_bytes = launch.resources.shared_bytes;
  w.memory = launch.memory;
  w.flops = launch.flops;
  launch.prediction = PredictKernelTime(target, w);
}

double SectorsPerRequest(const KernelMemoryStats& m) {
  const int64_t requests = m.global_loads.requests + m.global_stores.requests;
  return requests > 0 ? static_cast<double>(m.global_loads.sectors + m.global_stores.sectors) / requests : 0;
}

std::string FormatGpuLaunchAnalyses(const std::vector<GpuLaunchAnalysis>& launches,
                                    const GpuTarget& target, const std::string& resources_source) {
  std::string out = fmt::format(
      "GPU simulator analysis: {} launch{}, times predicted for {} ({}: {} SMs, {:.0f} GB/s "
      "copy of {:.0f} GB/s peak); registers from {}\n",
      launches.size(), launches.size() == 1 ? "" : "es", target.name, target.description,
      target.sms, target.dram_copy_gbps, target.dram_peak_gbps, resources_source);
  out += fmt::format("{:<22} {:>13} {:>4} {:>6} {:>12} {:>9} {:>7} {:>9} {:>7} {:>8} {:>10} {:>9} {:>10} {:>7}  {}\n",
                     "kernel (hlo)", "grid x block", "regs", "smem", "occupancy", "ld req", "sect/rq",
                     "st req", "sect/rq", "bk confl", "DRAM", "flops", "predicted", "%copyBW", "bound");
  double total_ns = 0, total_dram = 0;
  std::vector<std::string> notes;
  for (const GpuLaunchAnalysis& l : launches) {
    const KernelMemoryStats& m = l.memory;
    const KernelPrediction& p = l.prediction;
    std::string name = l.kernel == l.hlo_instruction || l.hlo_instruction.empty()
                           ? l.kernel
                           : fmt::format("{} ({})", l.kernel, l.hlo_instruction);
    out += fmt::format(
        "{:<22} {:>13} {:>4} {:>6} {:>12} {:>9} {:>7} {:>9} {:>7} {:>8} {:>10} {:>9} {:>10} {:>6.1f}%  {}\n",
        name, fmt::format("{}x{}", l.dims.blocks, l.dims.threads_per_block), l.resources.registers,
        l.resources.shared_bytes, fmt::format("{:.0f}% {}", 100 * p.occupancy.fraction, p.occupancy.limiter),
        m.global_loads.requests, PerRequest(m.global_loads), m.global_stores.requests,
        PerRequest(m.global_stores), m.shared_loads.bank_conflicts() + m.shared_stores.bank_conflicts(),
        Bytes(static_cast<double>(m.dram_bytes())), l.flops > 0 ? fmt::format("{:.3g}", l.flops) : "-",
        Time(p.total_ns), 100 * p.copy_bandwidth_fraction, p.bound);
    if (m.sampled()) {
      notes.push_back(fmt::format("{}: {} of {} blocks analysed (evenly spaced), counts scaled by {:.1f}",
                                  l.kernel, m.blocks_analysed, m.blocks,
                                  static_cast<double>(m.blocks) / m.blocks_analysed));
    }
    total_ns += p.total_ns;
    total_dram += static_cast<double>(m.dram_bytes());
  }
  out += fmt::format("total: {} predicted, {} from DRAM, {:.1f}% of the copy bandwidth over the module\n",
                     Time(total_ns), Bytes(total_dram),
                     total_ns > 0 ? 100 * total_dram / total_ns / target.dram_copy_gbps : 0.0);
  for (const std::string& note : notes) out += "note: " + note + "\n";
  return out;
}

std::vector<profiler::TraceArg> PredictedSpanArgs(const GpuLaunchAnalysis& l, const GpuTarget& target) {
  const KernelMemoryStats& m = l.memory;
  const KernelPrediction& p = l.prediction;
  std::vector<profiler::TraceArg> args = {
      {"grid", std::vector<int64_t>{l.dims.blocks, 1, 1}},
      {"block", std::vector<int64_t>{l.dims.threads_per_block, 1, 1}},
      {"registers per thread", int64_t{l.resources.registers}},
      {"shared memory", l.resources.shared_bytes},
      {"target", target.name},
      {"global load requests", m.global_loads.requests},
      {"global load sectors", m.global_loads.sectors},
      {"global store requests", m.global_stores.requests},
      {"global store sectors", m.global_stores.sectors},
      {"sectors per request", SectorsPerRequest(m)},
      {"load sectors per request", m.global_loads.SectorsPerRequest()},
      {"store sectors per request", m.global_stores.SectorsPerRequest()},
      {"ideal sectors", m.global_loads.ideal_sectors + m.global_stores.ideal_sectors},
      {"shared bank conflicts", m.shared_loads.bank_conflicts() + m.shared_stores.bank_conflicts()},
      {"dram bytes", m.dram_bytes()},
      {"occupancy", p.occupancy.fraction},
      {"occupancy limiter", p.occupancy.limiter},
      {"predicted memory ns", p.memory_ns},
      {"predicted compute ns", p.compute_ns},
      {"launch overhead ns", p.launch_ns},
      {"bound", p.bound},
      {"fraction of copy bandwidth", p.copy_bandwidth_fraction},
  };
  if (m.sampled()) {
    args.push_back({"blocks analysed", m.blocks_analysed});
  }
  return args;
}

profiler::HloProfileEntry::GpuAnalysis ProfileColumns(const GpuLaunchAnalysis& l) {
  profiler::HloProfileEntry::GpuAnalysis g;
  g.sectors_per_request = SectorsPerRequest(l.memory);
  g.dram_bytes = static_cast<double>(l.memory.dram_bytes());
  g.occupancy = l.prediction.occupancy.fraction;
  g.bank_conflicts = l.memory.shared_loads.bank_conflicts() + l.memory.shared_stores.bank_conflicts();
  g.bound = l.prediction.bound;
  return g;
}

}  // namespace xlens::runtime
