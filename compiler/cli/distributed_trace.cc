#include "compiler/cli/distributed_trace.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/runtime/multi_device_trace.h"
#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"
#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/collective_timeline.h"
#include "profiler/host_tracer.h"
#include "profiler/trace_summary.h"

namespace xlens::cli {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

// This rank's host spans and tracks move to the rank's own host process.
void NameRankHost(profiler::Trace& trace, int rank) {
  const int32_t pid = kRankHostPidBase + rank;
  for (profiler::TraceEvent& event : trace.events) {
    if (event.pid == profiler::kHostPid) event.pid = pid;
  }
  for (profiler::TraceThread& thread : trace.threads) {
    if (thread.pid == profiler::kHostPid) thread.pid = pid;
  }
  for (profiler::TraceProcess& process : trace.processes) {
    if (process.pid != profiler::kHostPid) continue;
    process.pid = pid;
    process.name = fmt::format("Host (CPU), rank {}", rank);
    process.sort_index = -1000 + rank;  // the hosts above the devices
  }
}

// The trace as the writer writes it, on the rank's steady clock (baseTimeNanoseconds is the
// steady base, so reading it back gives the same times).
StatusOr<std::string> Serialize(profiler::Trace trace, const std::string& dir) {
  trace.wall_base_ns = 0;
  const std::string path = dir + "/rank.ctf.json";
  RETURN_IF_ERROR(profiler::WriteChromeTrace(trace, path));
  return ReadFile(path);
}

}  // namespace

Status DistributedTrace::Start() {
  if (path_.empty()) return OkStatus();
  profiler::SetCurrentThreadName("main");
  if (!profiler::TracerSession::Start()) return Error("--trace: another trace is being recorded");
  recording_ = true;
  return OkStatus();
}

Status DistributedTrace::Finish(CollectiveTransport& transport, const DeviceTopology& topology,
                                double timeout_seconds, std::string& report) {
  if (!recording_) return OkStatus();
  recording_ = false;
  profiler::Trace trace = profiler::TracerSession::Stop();
  const int64_t wall_base_ns = trace.wall_base_ns;
  runtime::PlaceDevicesOnTimeline(trace, topology);
  NameRankHost(trace, transport.rank());
  ASSIGN_OR_RETURN(TemporaryDirectory dir, TemporaryDirectory::Create("trace"));
  StatusOr<std::string> text = Serialize(std::move(trace), dir.path());
  // Every rank takes part in the all-gathers whatever happened here: a rank whose trace could not
  // be made brings an empty one, and rank 0 says so.
  transport.AllGather("", "the trace's clock barrier", timeout_seconds);
  const std::string clock = fmt::format("{} {}", profiler::NowNs(), HostName());
  std::vector<std::string> clocks = transport.AllGather(clock, "the trace's clocks", timeout_seconds);
  std::vector<std::string> texts =
      transport.AllGather(text.ok() ? *text : std::string(), "the ranks' traces", timeout_seconds);
  if (transport.rank() != 0) return text.status();

  auto parse_clock = [](const std::string& entry, int64_t& now, std::string& host) {
    std::istringstream in(entry);
    in >> now >> host;
  };
  int64_t now0 = 0;
  std::string host0;
  parse_clock(clocks[0], now0, host0);
  profiler::Trace merged;
  std::vector<std::string> missing;
  for (size_t rank = 0; rank < texts.size(); ++rank) {
    if (texts[rank].empty()) {
      missing.push_back(std::to_string(rank));
      continue;
    }
    auto part = profiler::ParseChromeTrace(texts[rank], fmt::format("the trace of rank {}", rank));
    if (!part.ok()) return part.status();
    int64_t now = 0;
    std::string host;
    parse_clock(clocks[rank], now, host);
    const int64_t shift = host == host0 ? 0 : now0 - now;
    for (profiler::TraceEvent& event : part->events) event.start_ns += shift;
    if (rank == 0) {
      merged.base_ns = part->base_ns;
      merged.wall_base_ns = wall_base_ns;
    }
    part->metadata.clear();
    merged.Append(std::move(*part));
  }
  if (!missing.empty()) {
    return Error(fmt::format("--trace {}: rank{} {} could not record {} trace", DisplayPath(path_),
                             missing.size() > 1 ? "s" : "", fmt::join(missing, ", "),
                             missing.size() > 1 ? "their" : "its"));
  }
  const profiler::CollectiveLinks links = profiler::LinkCollectives(merged);
  merged.metadata.push_back({"ranks", static_cast<int64_t>(texts.size())});
  merged.metadata.push_back({"devices", topology.num_devices()});
  merged.metadata.push_back({"collective_meetings", links.meetings});
  merged.metadata.push_back({"collective_flows", links.flows});
  if (links.incomplete > 0) merged.metadata.push_back({"incomplete_collective_spans", links.incomplete});
  RETURN_IF_ERROR(profiler::WriteChromeTrace(merged, path_));
  report += profiler::SummarizeDeviceCollectives(merged);
  std::fprintf(stderr, "xlens run: wrote %zu trace events of %zu ranks on %lld devices to %s\n",
               merged.events.size(), texts.size(), static_cast<long long>(topology.num_devices()),
               path_.c_str());
  return OkStatus();
}

}  // namespace xlens::cli
