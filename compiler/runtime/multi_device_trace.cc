#include "compiler/runtime/multi_device_trace.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace xlens::runtime {
namespace {

constexpr std::string_view kThreadPrefix = "device ";
// Every device's spans go on one track of its process, whatever thread ran each run.
constexpr int64_t kDeviceTid = 1;

// The device a thread named DeviceThreadName(d) runs, when d is one of `devices`.
std::optional<int64_t> DeviceOfThread(const std::string& name, int64_t devices) {
  if (name.size() <= kThreadPrefix.size() || name.compare(0, kThreadPrefix.size(), kThreadPrefix) != 0) {
    return std::nullopt;
  }
  int64_t device = -1;
  const char* begin = name.data() + kThreadPrefix.size();
  const char* end = name.data() + name.size();
  auto [ptr, error] = std::from_chars(begin, end, device);
  if (error != std::errc() || ptr != end || device < 0 || device >= devices) return std::nullopt;
  if (DeviceThreadName(device) != name) return std::nullopt;  // "device 03"
  return device;
}

}  // namespace

std::string DeviceThreadName(int64_t device) { return fmt::format("device {}", device); }

std::string DeviceProcessName(const DeviceTopology& topology, int64_t device) {
  return fmt::format("CPU device {} (replica {}, partition {})", device,
                     device / topology.num_partitions, device % topology.num_partitions);
}

int64_t PlaceDevicesOnTimeline(profiler::Trace& trace, const DeviceTopology& topology) {
  const int64_t devices = topology.num_devices();
  std::map<int64_t, int64_t> device_of_tid;
  std::vector<profiler::TraceThread> threads;
  for (profiler::TraceThread& thread : trace.threads) {
    std::optional<int64_t> device;
    if (thread.pid == profiler::kHostPid) device = DeviceOfThread(thread.name, devices);
    if (device) {
      device_of_tid[thread.tid] = *device;
    } else {
      threads.push_back(std::move(thread));
    }
  }
  trace.threads = std::move(threads);
  std::vector<bool> seen(static_cast<size_t>(devices), false);
  for (profiler::TraceEvent& event : trace.events) {
    if (event.pid != profiler::kHostPid) continue;
    auto it = device_of_tid.find(event.tid);
    if (it == device_of_tid.end()) continue;
    event.pid = profiler::kCpuDevicePidBase + static_cast<int32_t>(it->second);
    event.tid = kDeviceTid;
    seen[static_cast<size_t>(it->second)] = true;
  }
  int64_t placed = 0;
  for (int64_t d = 0; d < devices; ++d) {
    if (!seen[static_cast<size_t>(d)]) continue;
    const int32_t pid = profiler::kCpuDevicePidBase + static_cast<int32_t>(d);
    trace.processes.push_back({pid, DeviceProcessName(topology, d), 1 + d});
    trace.threads.push_back({pid, kDeviceTid, DeviceThreadName(d), 0});
    ++placed;
  }
  return placed;
}

}  // namespace xlens::runtime
