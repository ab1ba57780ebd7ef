// libFuzzer target for the Chrome trace reader. Any bytes (JSON text or gzip) must give a trace or
// a clean one-line error: no crash, no sanitizer report, no hang, no unbounded allocation. Both
// ways of reading are fuzzed: the whole trace in memory (with args and flows) and the streaming
// one the summary uses (without them), and a trace that reads must also summarize.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "profiler/chrome_trace_reader.h"
#include "profiler/trace_input_stream.h"
#include "profiler/trace_summary.h"

namespace {

void CheckOneLine(const xlens::Status& status) {
  if (status.message().find('\n') != std::string::npos) {
    std::fprintf(stderr, "an error of more than one line: %s\n", status.message().c_str());
    std::abort();
  }
}

struct CountingVisitor : xlens::profiler::ChromeTraceVisitor {
  bool WantsArgs() const override { return false; }
  bool WantsFlows() const override { return false; }
  void OnEvent(xlens::profiler::TraceEvent& event) override { ++events; }
  size_t events = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto trace = xlens::profiler::ParseChromeTrace(bytes, "fuzz");
  if (!trace.ok()) {
    CheckOneLine(trace.status());
  } else {
    (void)xlens::profiler::SummarizeTrace(*trace);
  }

  CountingVisitor visitor;
  auto input = xlens::profiler::TraceInputStream::FromMemory(bytes, "fuzz");
  auto header = xlens::profiler::StreamChromeTrace(*input, visitor);
  if (header.ok() != trace.ok()) {
    std::fprintf(stderr, "streamed and whole reads disagree: %s / %s\n", header.status().message().c_str(),
                 trace.status().message().c_str());
    std::abort();
  }
  if (trace.ok() && visitor.events != trace->events.size()) {
    std::fprintf(stderr, "streamed %zu events, read %zu\n", visitor.events, trace->events.size());
    std::abort();
  }
  return 0;
}
