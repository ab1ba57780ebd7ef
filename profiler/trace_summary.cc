#include "profiler/trace_summary.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_reader.h"

namespace xlens::profiler {

namespace {

constexpr size_t kMaxShownNameBytes = 1000;

struct Totals {
  int64_t count = 0;
  __int128 total_ns = 0;  // a sum of int64 durations: 128 bits never overflow
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

std::string Ms(__int128 ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }
std::string Us(double ns) { return fmt::format("{:.2f}", ns / 1e3); }

// Text from the file, safe for a terminal and of a size a terminal can show.
std::string Shown(std::string_view text) {
  if (text.size() <= kMaxShownNameBytes) return EscapeForTerminal(text);
  return fmt::format("{}... ({} bytes)", EscapeForTerminal(TruncateUtf8(text, kMaxShownNameBytes)), text.size());
}

// Aggregates events one at a time: per category and per kernel name, never the events. Names are
// kept up to 64 MiB in all (or the input limit when smaller); events of names beyond are counted
// together, and the summary says so.
size_t MaxKeptBytes() { return static_cast<size_t>(std::min<int64_t>(int64_t{64} << 20, MaxInputBytes())); }
constexpr size_t kEntryBytes = 128;  // the node and the totals beside a name
constexpr const char* kOtherKernels = "(other kernels)";
constexpr const char* kOtherCategories = "(other categories)";
// Tracks and processes are counted from the events' own pid and tid (a trace need not name its
// threads), up to this many; past it the summary says "more than".
constexpr size_t kMaxCountedTracks = size_t{1} << 16;

// The collectives of each device (process) of a run on several devices: how many, what they
// brought, how long they waited and for whom (the spans' bytes, wait_ns and last_arrival; see
// compiler/runtime/multi_device_trace.h). One entry per process with collectives.
class CollectivesByDevice {
 public:
  void Add(const TraceEvent& event) {
    if (by_pid_.size() >= kMaxCountedTracks && !by_pid_.count(event.pid)) return;
    Device& device = by_pid_[event.pid];
    ++device.count;
    device.bytes += IntArg(event, "bytes");
    const int64_t wait = std::max<int64_t>(0, IntArg(event, "wait_ns"));
    device.wait_ns += wait;
    if (wait > 0 && FindArg(event, "last_arrival") != nullptr &&
        (device.waited_for.size() < kMaxCountedTracks || device.waited_for.count(IntArg(event, "last_arrival")))) {
      device.waited_for[IntArg(event, "last_arrival")] += wait;
    }
  }
  void AddNames(const std::vector<TraceProcess>& processes) {
    for (const TraceProcess& process : processes) {
      if (by_pid_.count(process.pid)) names_[process.pid] = process.name;
    }
  }

  std::string Render() const {
    if (by_pid_.empty()) return "";
    std::string out = "\nCollectives by device (wait: from its arrival to the last member's):\n";
    out += fmt::format("  {:>11} {:>10} {:>10}  {:<22}  {}\n", "collectives", "MB", "wait ms", "waited most for",
                       "device");
    for (const auto& [pid, device] : by_pid_) {
      std::string most = "-";
      __int128 most_ns = 0;
      for (const auto& [who, ns] : device.waited_for) {
        if (ns > most_ns) {
          most_ns = ns;
          most = fmt::format("device {} ({} ms)", who, Ms(ns));
        }
      }
      auto name = names_.find(pid);
      out += fmt::format("  {:>11} {:>10.3f} {:>10}  {:<22}  {}\n", device.count,
                         static_cast<double>(device.bytes) / 1e6, Ms(device.wait_ns), most,
                         name != names_.end() ? Shown(name->second) : fmt::format("process {}", pid));
    }
    return out;
  }

 private:
  struct Device {
    int64_t count = 0;
    __int128 bytes = 0, wait_ns = 0;
    std::map<int64_t, __int128> waited_for;  // last member -> time waited for it
  };
  static int64_t IntArg(const TraceEvent& event, const char* key) {
    const TraceArg* arg = FindArg(event, key);
    const int64_t* value = arg != nullptr ? std::get_if<int64_t>(&arg->value) : nullptr;
    return value != nullptr ? *value : 0;
  }
  std::map<int32_t, Device> by_pid_;
  std::map<int32_t, std::string> names_;
};

class SummaryBuilder {
 public:
  void Add(const TraceEvent& event) {
    ++events_;
    AddTrack(event.pid, event.tid);
    first_ = std::min<__int128>(first_, event.start_ns);
    last_ = std::max<__int128>(last_, static_cast<__int128>(event.start_ns) + event.duration_ns);
    Find(by_category_, event.category, other_category_).Add(event.duration_ns);
    if (IsKernelCategory(event.category)) {
      Totals& totals = Find(by_kernel_, event.name, other_kernel_);
      totals.Add(event.duration_ns);
      if (&totals != &other_kernel_ && totals.category != event.category) totals.category = event.category;
      kernel_ns_ += event.duration_ns;
      // XLA's kernels say their module (jax.profiler's and TensorFlow's traces, XSpace).
      if (const TraceArg* module = FindArg(event, "hlo_module")) {
        if (const auto* name = std::get_if<std::string>(&module->value)) {
          Find(by_module_, *name, other_module_).Add(event.duration_ns);
        }
      }
    }
    if (event.category == category::kCollective) collectives_.Add(event);
  }

  // A track (and its process), with or without events: the named threads and processes of the
  // trace's metadata count too.
  void AddTrack(int32_t pid, int64_t tid) {
    AddProcess(pid);
    if (tracks_.size() < kMaxCountedTracks) tracks_.insert({pid, tid});
    else if (!tracks_.count({pid, tid})) tracks_overflowed_ = true;
  }
  void AddProcess(int32_t pid) {
    if (processes_.size() < kMaxCountedTracks) processes_.insert(pid);
    else if (!processes_.count(pid)) processes_overflowed_ = true;
  }
  void AddNamed(const std::vector<TraceThread>& threads, const std::vector<TraceProcess>& processes) {
    for (const TraceThread& thread : threads) AddTrack(thread.pid, thread.tid);
    for (const TraceProcess& process : processes) AddProcess(process.pid);
    collectives_.AddNames(processes);
  }

  std::string Render(const std::vector<TraceArg>& metadata, int top_kernels) const;

 private:
  Totals& Find(std::unordered_map<std::string, Totals>& map, const std::string& key, Totals& other) {
    auto it = map.find(key);
    if (it != map.end()) return it->second;
    if (key.size() + kEntryBytes > max_kept_bytes_ - std::min(kept_bytes_, max_kept_bytes_)) {
      ++folded_events_;
      return other;
    }
    kept_bytes_ += key.size() + kEntryBytes;
    return map.emplace(key, Totals{}).first->second;
  }

  int64_t events_ = 0;
  __int128 first_ = INT64_MAX, last_ = INT64_MIN, kernel_ns_ = 0;
  std::unordered_map<std::string, Totals> by_category_;
  std::unordered_map<std::string, Totals> by_kernel_;
  std::unordered_map<std::string, Totals> by_module_;
  Totals other_category_, other_kernel_{.category = "(mixed)"}, other_module_;
  const size_t max_kept_bytes_ = MaxKeptBytes();
  size_t kept_bytes_ = 0;
  int64_t folded_events_ = 0;
  std::set<std::pair<int32_t, int64_t>> tracks_;
  std::set<int32_t> processes_;
  bool tracks_overflowed_ = false, processes_overflowed_ = false;
  CollectivesByDevice collectives_;
};

// The largest totals first; equal totals by name, so the output does not depend on hashing.
std::vector<std::pair<std::string, Totals>> Sorted(const std::unordered_map<std::string, Totals>& map,
                                                   const char* other_name, const Totals& other) {
  std::vector<std::pair<std::string, Totals>> sorted(map.begin(), map.end());
  if (other.count > 0) sorted.emplace_back(other_name, other);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.total_ns != b.second.total_ns) return a.second.total_ns > b.second.total_ns;
    return a.first < b.first;
  });
  return sorted;
}

std::string SummaryBuilder::Render(const std::vector<TraceArg>& metadata, int top_kernels) const {
  std::string out;
  out += fmt::format("{} events on {}{} tracks in {}{} processes, {} ms from first to last\n", events_,
                     tracks_overflowed_ ? "more than " : "", tracks_.size(),
                     processes_overflowed_ ? "more than " : "", processes_.size(),
                     events_ == 0 ? "0.000" : Ms(last_ - first_));
  for (const char* key : {"dropped_records", "kernels_before_launch", "unbound_flow_points",
                          "xspace_events_without_metadata"}) {
    for (const TraceArg& counter : metadata) {
      if (counter.key != key) continue;
      if (const auto* value = std::get_if<int64_t>(&counter.value); value && *value != 0) {
        out += fmt::format("warning: {} = {}\n", key, *value);
      }
      break;
    }
  }
  if (folded_events_ > 0) {
    out += fmt::format("warning: more distinct names than the summary keeps ({} of them): {} events are counted "
                       "under {} and {}\n",
                       FormatBytes(static_cast<int64_t>(max_kept_bytes_)), folded_events_, kOtherKernels,
                       kOtherCategories);
  }

  out += "\nBy category (durations of nested spans count in each):\n";
  out += fmt::format("  {:<16} {:>8} {:>12}\n", "category", "events", "total ms");
  for (const auto& [name, totals] : Sorted(by_category_, kOtherCategories, other_category_)) {
    out += fmt::format("  {:<16} {:>8} {:>12}\n", name.empty() ? "(none)" : Shown(name), totals.count,
                       Ms(totals.total_ns));
  }

  out += collectives_.Render();
  if (by_kernel_.empty() && other_kernel_.count == 0) {
    out += "\nNo kernels (no events in categories cpu_kernel, library_call or kernel).\n";
    return out;
  }
  if (!by_module_.empty() || other_module_.count > 0) {
    out += "\nKernels by HLO module:\n";
    out += fmt::format("  {:>10} {:>8}  {}\n", "total ms", "kernels", "module");
    for (const auto& [name, totals] : Sorted(by_module_, "(other modules)", other_module_)) {
      out += fmt::format("  {:>10} {:>8}  {}\n", Ms(totals.total_ns), totals.count, Shown(name));
    }
  }
  std::vector<std::pair<std::string, Totals>> kernels = Sorted(by_kernel_, kOtherKernels, other_kernel_);
  out += fmt::format("\nTop kernels ({} distinct{}, {} ms in all):\n", by_kernel_.size(),
                     other_kernel_.count > 0 ? " and more" : "", Ms(kernel_ns_));
  out += fmt::format("  {:>10} {:>7} {:>6} {:>10} {:>10} {:>10}  {:<12} {}\n", "total ms", "%", "calls", "avg us",
                     "min us", "max us", "category", "name");
  int shown = 0;
  for (const auto& [name, totals] : kernels) {
    if (shown++ == top_kernels) {
      out += fmt::format("  ... {} more\n", kernels.size() - static_cast<size_t>(top_kernels));
      break;
    }
    double share = kernel_ns_ != 0 ? 100.0 * static_cast<double>(totals.total_ns) / static_cast<double>(kernel_ns_) : 0.0;
    out += fmt::format("  {:>10} {:>6.1f}% {:>6} {:>10} {:>10} {:>10}  {:<12} {}\n", Ms(totals.total_ns), share,
                       totals.count, Us(static_cast<double>(totals.total_ns) / static_cast<double>(totals.count)),
                       Us(static_cast<double>(totals.min_ns)), Us(static_cast<double>(totals.max_ns)),
                       Shown(totals.category), Shown(name));
  }
  return out;
}

class SummaryVisitor : public ChromeTraceVisitor {
 public:
  explicit SummaryVisitor(SummaryBuilder& builder) : builder_(builder) {}
  bool WantsArgs() const override { return false; }
  // Flows would keep 24 bytes an event; the file's own counters are still shown.
  bool WantsFlows() const override { return false; }
  void OnEvent(TraceEvent& event) override { builder_.Add(event); }

 private:
  SummaryBuilder& builder_;
};

}  // namespace

std::string SummarizeDeviceCollectives(const Trace& trace) {
  CollectivesByDevice collectives;
  for (const TraceEvent& event : trace.events) {
    if (event.category == category::kCollective) collectives.Add(event);
  }
  collectives.AddNames(trace.processes);
  return collectives.Render();
}

std::string SummarizeTrace(const Trace& trace, int top_kernels) {
  SummaryBuilder builder;
  for (const TraceEvent& event : trace.events) builder.Add(event);
  builder.AddNamed(trace.threads, trace.processes);
  return builder.Render(trace.metadata, top_kernels);
}

StatusOr<std::string> SummarizeChromeTrace(const std::string& path, int top_kernels) {
  SummaryBuilder builder;
  SummaryVisitor visitor(builder);
  ASSIGN_OR_RETURN(ChromeTraceHeader header, StreamChromeTrace(path, visitor));
  builder.AddNamed(header.threads, header.processes);
  return builder.Render(header.metadata, top_kernels);
}

}  // namespace xlens::profiler
