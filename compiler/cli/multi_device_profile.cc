#include "compiler/cli/multi_device_profile.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "compiler/cli/thunk_profile.h"
#include "compiler/runtime/multi_device_trace.h"
#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/collective_timeline.h"
#include "profiler/host_tracer.h"
#include "profiler/trace_summary.h"

namespace xlens::cli {

Status DeviceRunProfile::Start(Watchdog& watchdog) {
  if (args_.trace.empty()) return OkStatus();
  profiler::SetCurrentThreadName("main");
  if (!profiler::TracerSession::Start()) return Error("--trace: another trace is being recorded");
  KeepTraceWhenStopped(watchdog, args_.trace);
  tracing_ = true;
  return OkStatus();
}

void DeviceRunProfile::Prepare(bool timed) {
  if (timed && setup_.debug.xla_hlo_profile) ++timed_runs_;
}

StatusOr<size_t> DeviceRunProfile::WriteTrace(const Watchdog& watchdog, std::string* report) {
  tracing_ = false;
  profiler::Trace trace = profiler::TracerSession::Stop();
  const int64_t devices = runtime::PlaceDevicesOnTimeline(trace, topology_);
  const profiler::CollectiveLinks links = profiler::LinkCollectives(trace);
  trace.metadata.push_back({"devices", devices});
  trace.metadata.push_back({"collective_meetings", links.meetings});
  trace.metadata.push_back({"collective_flows", links.flows});
  if (links.incomplete > 0) trace.metadata.push_back({"incomplete_collective_spans", links.incomplete});
  MarkStopped(trace, watchdog);
  RETURN_IF_ERROR(profiler::WriteChromeTrace(trace, args_.trace));
  if (report != nullptr) *report += profiler::SummarizeDeviceCollectives(trace);
  return trace.events.size();
}

Status DeviceRunProfile::Finish(const runtime::MultiDeviceExecutable& executable, const Watchdog& watchdog,
                                std::string& report) {
  if (setup_.debug.xla_hlo_profile) {
    for (int64_t d = 0; d < topology_.num_devices() && d < static_cast<int64_t>(thunk_ns_.size()); ++d) {
      const runtime::Executable& exe = executable.executable(d);
      const std::string text = ThunkProfileText(
          exe, fmt::format("{} on {}", exe.module().name(), runtime::DeviceProcessName(topology_, d)),
          thunk_ns_[static_cast<size_t>(d)], std::max(timed_runs_, 1));
      report += text;
      if (setup_.dump && setup_.dump->enabled()) {
        setup_.dump->DumpText(exe.module(), fmt::format("device_{}.hlo_profile.txt", d), text);
      }
    }
  }
  if (!tracing_) return OkStatus();
  std::string lines;
  ASSIGN_OR_RETURN(size_t events, WriteTrace(watchdog, &lines));
  report += lines;
  std::fprintf(stderr, "xlens run: wrote %zu trace events on %lld devices to %s\n", events,
               static_cast<long long>(topology_.num_devices()), args_.trace.c_str());
  return OkStatus();
}

Status DeviceRunProfile::Failed(Status failure, const Watchdog& watchdog) {
  if (!tracing_) return failure;
  StatusOr<size_t> written = WriteTrace(watchdog, nullptr);
  return Error(failure.message() + (written.ok() ? "; the trace up to here is in " + DisplayPath(args_.trace)
                                                 : "; the trace could not be written: " + written.status().message()));
}

}  // namespace xlens::cli
