#include "profiler/steal_time.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <string>

#include <fmt/format.h>

#include "compiler/support/file_io.h"

namespace xlens::profiler {
namespace {

// The counters of a "cpuN" line up to steal, in /proc/stat's order (proc(5)): user, nice, system,
// idle, iowait, irq, softirq, steal. Guest and guest_nice follow and are left out of the total,
// since user and nice count them already.
constexpr int kCountersThroughSteal = 8;

// /proc/stat is a few kilobytes a CPU; far more is not the kernel's file.
constexpr int64_t kMaxProcStatBytes = 16 << 20;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view NextField(std::string_view line, size_t* at) {
  const size_t begin = line.find_first_not_of(' ', *at);
  if (begin == std::string_view::npos) {
    *at = line.size();
    return {};
  }
  const size_t end = std::min(line.find(' ', begin), line.size());
  *at = end;
  return line.substr(begin, end - begin);
}

template <typename T>
bool ParseNumber(std::string_view text, T* value) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

StatusOr<CpuTicks> ParseCpuTicks(std::string_view proc_stat, const std::vector<int>& cpus) {
  const std::set<int> wanted(cpus.begin(), cpus.end());
  std::set<int> seen;
  CpuTicks sum;
  int line_number = 0;
  for (size_t start = 0; start < proc_stat.size();) {
    const size_t newline = std::min(proc_stat.find('\n', start), proc_stat.size());
    const std::string_view line = proc_stat.substr(start, newline - start);
    start = newline + 1;
    ++line_number;
    // Only "cpuN" lines: the machine's "cpu" line and intr, ctxt, btime and the rest are skipped.
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || !IsDigit(line[3])) continue;
    size_t at = 0;
    const std::string_view name = NextField(line, &at);
    int cpu = -1;
    if (!ParseNumber(name.substr(3), &cpu)) {
      return Error(fmt::format("/proc/stat line {}: \"{}\" is not a CPU's name (cpu and a number)", line_number,
                               name.substr(0, 32)));
    }
    if (wanted.count(cpu) == 0) continue;
    if (!seen.insert(cpu).second) return Error(fmt::format("/proc/stat line {}: a second line for cpu{}", line_number, cpu));
    CpuTicks ticks;
    for (int i = 0; i < kCountersThroughSteal; ++i) {
      const std::string_view field = NextField(line, &at);
      uint64_t value = 0;
      if (field.empty()) {
        return Error(fmt::format("/proc/stat line {}: cpu{} has {} counters, expected at least {} (user through steal)",
                                 line_number, cpu, i, kCountersThroughSteal));
      }
      if (!ParseNumber(field, &value)) {
        return Error(fmt::format("/proc/stat line {}: cpu{}'s counter {} is \"{}\", expected a count of ticks",
                                 line_number, cpu, i + 1, field.substr(0, 32)));
      }
      if (__builtin_add_overflow(ticks.total, value, &ticks.total)) {
        return Error(fmt::format("/proc/stat line {}: cpu{}'s counters overflow", line_number, cpu));
      }
      if (i == kCountersThroughSteal - 1) ticks.steal = value;
    }
    if (__builtin_add_overflow(sum.total, ticks.total, &sum.total) ||
        __builtin_add_overflow(sum.steal, ticks.steal, &sum.steal)) {
      return Error(fmt::format("/proc/stat line {}: the CPUs' counters overflow", line_number));
    }
  }
  for (int cpu : wanted) {
    if (seen.count(cpu) == 0) return Error(fmt::format("/proc/stat has no line for cpu{}", cpu));
  }
  return sum;
}

std::optional<CpuTicks> ReadProcessCpuTicks() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  // ReadFile reads past the size of 0 that fstat gives a /proc file, up to the limit.
  StatusOr<std::string> text = ReadFile("/proc/stat", kMaxProcStatBytes);
  if (!text.ok()) return std::nullopt;
  StatusOr<CpuTicks> ticks = ParseCpuTicks(*text, cpus);
  if (!ticks.ok()) return std::nullopt;
  return *ticks;
}

std::optional<double> StealShare(const CpuTicks& before, const CpuTicks& after, uint64_t min_ticks) {
  if (after.total < before.total || after.steal < before.steal) return std::nullopt;
  const uint64_t total = after.total - before.total;
  const uint64_t steal = after.steal - before.steal;
  if (total < std::max<uint64_t>(min_ticks, 1) || steal > total) return std::nullopt;
  return static_cast<double>(steal) / static_cast<double>(total);
}

}  // namespace xlens::profiler
