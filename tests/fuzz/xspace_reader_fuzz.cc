// libFuzzer target for the XSpace reader (*.xplane.pb). Any bytes must give a trace or a clean
// one-line error: no crash, no sanitizer report, no hang, no unbounded allocation. Read twice, as
// the viewer reads (args and flows) and as the summary does (neither); both must agree on the
// events.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "profiler/xspace_reader.h"

namespace {

struct CountingVisitor : xlens::profiler::ChromeTraceVisitor {
  explicit CountingVisitor(bool full) : full(full) {}
  bool WantsArgs() const override { return full; }
  bool WantsFlows() const override { return full; }
  void OnEvent(xlens::profiler::TraceEvent& event) override {
    ++events;
    if (event.duration_ns < 0) std::abort();
  }
  void OnFlow(size_t ordinal, int64_t, bool, int64_t) override {
    if (ordinal >= events) std::abort();
  }
  bool full;
  size_t events = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CountingVisitor full(true), lean(false);
  auto a = xlens::profiler::StreamXSpaceBytes(bytes, "fuzz.xplane.pb", full);
  auto b = xlens::profiler::StreamXSpaceBytes(bytes, "fuzz.xplane.pb", lean);
  if (a.ok() != b.ok()) std::abort();
  if (!a.ok()) {
    if (a.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  if (full.events != lean.events) std::abort();
  return 0;
}
