#include "profiler/predicted_kernels.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace xlens::profiler {

void AppendPredictedKernels(Trace& trace, const std::string& device, std::vector<PredictedKernel> kernels) {
  if (kernels.empty()) return;
  // The host side of each flow: the first host event (by start) with the launch's id.
  std::unordered_map<int64_t, TraceEvent*> launches;
  for (const PredictedKernel& k : kernels) launches.emplace(k.external_id, nullptr);
  for (TraceEvent& event : trace.events) {
    if (event.pid != kHostPid) continue;
    const TraceArg* id = FindArg(event, "External id");
    const int64_t* value = id ? std::get_if<int64_t>(&id->value) : nullptr;
    if (value == nullptr) continue;
    auto it = launches.find(*value);
    if (it != launches.end() && (it->second == nullptr || event.start_ns < it->second->start_ns)) {
      it->second = &event;
    }
  }
  std::vector<TraceEvent> added;
  int64_t stream_free = 0;
  for (PredictedKernel& k : kernels) {
    TraceEvent event;
    event.name = std::move(k.name);
    event.category = category::kGpuKernel;
    event.pid = kPredictedGpuPid;
    event.tid = kPredictedStreamTid;
    event.start_ns = std::max(k.launch_ns, stream_free);
    event.duration_ns = std::max<int64_t>(1, k.duration_ns);
    stream_free = event.start_ns + event.duration_ns;
    event.args.push_back({"device", int64_t{0}});
    event.args.push_back({"stream", kPredictedStreamTid});
    event.args.push_back({"correlation", k.external_id});
    event.args.push_back({"External id", k.external_id});
    event.args.push_back({"predicted", int64_t{1}});
    for (TraceArg& arg : k.args) event.args.push_back(std::move(arg));
    // Flow ids share CUPTI's space (correlation ids), so the simulator's are its launch ids
    // offset far above any correlation id a real run produces in the same trace.
    const int64_t flow = (int64_t{1} << 40) + k.external_id;
    if (TraceEvent* launch = launches[k.external_id]; launch != nullptr && launch->flow_out == 0) {
      launch->flow_out = flow;
      event.flow_in = flow;
    }
    added.push_back(std::move(event));
  }
  trace.processes.push_back({kPredictedGpuPid, "GPU (predicted: " + device + ")", kPredictedGpuPid});
  trace.threads.push_back({kPredictedGpuPid, kPredictedStreamTid, "stream 0 (predicted)", 0});
  for (TraceEvent& e : added) trace.events.push_back(std::move(e));
  std::stable_sort(trace.events.begin(), trace.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.start_ns, b.duration_ns) < std::tie(b.start_ns, a.duration_ns);
  });
}

}  // namespace xlens::profiler
