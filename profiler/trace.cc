#include "profiler/trace.h"

#include <iterator>

namespace xlens::profiler {

void Trace::Append(Trace other) {
  auto move_into = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  move_into(processes, other.processes);
  move_into(threads, other.threads);
  move_into(events, other.events);
  move_into(metadata, other.metadata);
}

const TraceArg* Trace::FindMetadata(const std::string& key) const {
  for (const TraceArg& arg : metadata) {
    if (arg.key == key) return &arg;
  }
  return nullptr;
}

bool IsKernelCategory(const std::string& category) {
  return category == category::kCpuKernel || category == category::kGpuKernel ||
         category == category::kLibrary;
}

const TraceArg* FindArg(const TraceEvent& event, const std::string& key) {
  for (const TraceArg& arg : event.args) {
    if (arg.key == key) return &arg;
  }
  return nullptr;
}

}  // namespace xlens::profiler
