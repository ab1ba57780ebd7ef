#include "profiler/trace_summary.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace xlens::profiler {

namespace {

struct Totals {
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = INT64_MAX;
  int64_t max_ns = 0;
  std::string category;
  void Add(int64_t ns) {
    ++count;
    total_ns += ns;
    min_ns = std::min(min_ns, ns);
    max_ns = std::max(max_ns, ns);
  }
};

std::string Ms(int64_t ns) { return fmt::format("{:.3f}", ns / 1e6); }
std::string Us(double ns) { return fmt::format("{:.2f}", ns / 1e3); }

}  // namespace

std::string SummarizeTrace(const Trace& trace, int top_kernels) {
  std::map<std::string, Totals> by_category;
  std::map<std::string, Totals> by_kernel;
  int64_t first = INT64_MAX, last = INT64_MIN, kernel_ns = 0;
  for (const TraceEvent& event : trace.events) {
    first = std::min(first, event.start_ns);
    last = std::max(last, event.start_ns + event.duration_ns);
    by_category[event.category.empty() ? "(none)" : event.category].Add(event.duration_ns);
    if (IsKernelCategory(event.category)) {
      Totals& totals = by_kernel[event.name];
      totals.Add(event.duration_ns);
      totals.category = event.category;
      kernel_ns += event.duration_ns;
    }
  }
  std::string out;
  out += fmt::format("{} events on {} tracks in {} processes, {} ms from first to last\n",
                     trace.events.size(), trace.threads.size(), trace.processes.size(),
                     trace.events.empty() ? "0.000" : Ms(last - first));
  for (const char* key : {"dropped_records", "kernels_before_launch", "unbound_flow_points"}) {
    const TraceArg* counter = trace.FindMetadata(key);
    if (counter == nullptr) continue;
    if (const auto* value = std::get_if<int64_t>(&counter->value); value && *value != 0) {
      out += fmt::format("warning: {} = {}\n", key, *value);
    }
  }

  out += "\nBy category (durations of nested spans count in each):\n";
  out += fmt::format("  {:<16} {:>8} {:>12}\n", "category", "events", "total ms");
  std::vector<std::pair<std::string, Totals>> categories(by_category.begin(), by_category.end());
  std::stable_sort(categories.begin(), categories.end(),
                   [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  for (const auto& [name, totals] : categories) {
    out += fmt::format("  {:<16} {:>8} {:>12}\n", name, totals.count, Ms(totals.total_ns));
  }

  std::vector<std::pair<std::string, Totals>> kernels(by_kernel.begin(), by_kernel.end());
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  if (kernels.empty()) {
    out += "\nNo kernels (no events in categories cpu_kernel, library_call or kernel).\n";
    return out;
  }
  out += fmt::format("\nTop kernels ({} distinct, {} ms in all):\n", kernels.size(), Ms(kernel_ns));
  out += fmt::format("  {:>10} {:>7} {:>6} {:>10} {:>10} {:>10}  {:<12} {}\n", "total ms", "%",
                     "calls", "avg us", "min us", "max us", "category", "name");
  int shown = 0;
  for (const auto& [name, totals] : kernels) {
    if (shown++ == top_kernels) {
      out += fmt::format("  ... {} more\n", kernels.size() - top_kernels);
      break;
    }
    out += fmt::format("  {:>10} {:>6.1f}% {:>6} {:>10} {:>10} {:>10}  {:<12} {}\n",
                       Ms(totals.total_ns), kernel_ns ? 100.0 * totals.total_ns / kernel_ns : 0.0,
                       totals.count, Us(double(totals.total_ns) / totals.count), Us(totals.min_ns),
                       Us(totals.max_ns), totals.category, name);
  }
  return out;
}

}  // namespace xlens::profiler
