// `xlens inspect DIR [--trace FILE] [--json FILE]`: the model of a dump directory as the viewer
// shows it (dump_directory.h), for scripts and CI: modules, their stages in pipeline order, their
// kernels with op_name and the source line they came from, the files that could not be placed,
// and with --trace, how many of the trace's kernel events link to a kernel of the dump. The
// report itself (dump_directory_report.h) is shared with Python's xlens.inspect.
#include <cstdio>
#include <map>
#include <optional>
#include <variant>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/support/file_io.h"
#include "dump/dump_directory.h"
#include "dump/dump_directory_report.h"
#include "profiler/chrome_trace_reader.h"

namespace xlens::cli {
namespace {

// Counts a trace's events and links kernel events to the dump's kernels by name: an event's
// hlo_op argument when it has one (XLA's and jax.profiler's), else its name; its hlo_module
// argument, when present, picks the module.
class LinkingVisitor : public profiler::ChromeTraceVisitor {
 public:
  explicit LinkingVisitor(const DumpDirectory& dump) {
    for (const ManifestModule& module : dump.manifest.modules) {
      for (const ManifestKernel& kernel : module.kernels) {
        // Several modules may hold a kernel of the same name (recompilations): the last wins,
        // as the viewer's FindModuleByName does.
        by_name_[kernel.name] = {module.id, kernel.name};
        by_module_[{module.name, kernel.name}] = {module.id, kernel.name};
        if (!kernel.hlo_instruction.empty()) by_name_.emplace(kernel.hlo_instruction, std::make_pair(module.id, kernel.name));
      }
    }
  }
  bool WantsFlows() const override { return false; }
  void OnEvent(profiler::TraceEvent& event) override {
    ++links.events;
    std::string op = event.name;
    std::string module;
    if (const profiler::TraceArg* arg = profiler::FindArg(event, "hlo_op")) {
      if (auto* text = std::get_if<std::string>(&arg->value)) op = *text;
    }
    if (const profiler::TraceArg* arg = profiler::FindArg(event, "hlo_module")) {
      if (auto* text = std::get_if<std::string>(&arg->value)) module = *text;
    }
    const std::pair<int64_t, std::string>* kernel = nullptr;
    if (!module.empty()) {
      auto it = by_module_.find({module, op});
      if (it != by_module_.end()) kernel = &it->second;
    }
    if (kernel == nullptr) {
      auto it = by_name_.find(op);
      if (it != by_name_.end()) kernel = &it->second;
    }
    bool is_kernel = profiler::IsKernelCategory(event.category) || !module.empty() ||
                     profiler::FindArg(event, "hlo_op") != nullptr || kernel != nullptr;
    if (!is_kernel) return;
    ++links.kernel_events;
    if (kernel == nullptr) return;
    ++links.linked_events;
    DumpTraceLinks::KernelTime& time = links.times[*kernel];
    ++time.events;
    time.total_ns += event.duration_ns;
  }

  DumpTraceLinks links;

 private:
  std::map<std::string, std::pair<int64_t, std::string>> by_name_;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::string>> by_module_;
};

}  // namespace

int RunInspect(const InspectArgs& args) {
  StatusOr<DumpDirectory> read = ReadDumpDirectoryForInspect(args.directory);
  if (!read.ok()) return Fail(read.status());
  const DumpDirectory& dump = *read;
  std::optional<LinkingVisitor> trace;
  if (!args.trace.empty()) {
    trace.emplace(dump);
    trace->links.file = args.trace;
    StatusOr<profiler::ChromeTraceHeader> header = profiler::StreamChromeTrace(args.trace, *trace);
    if (!header.ok()) return Fail(header.status());
  }
  const DumpTraceLinks* linked = trace ? &trace->links : nullptr;
  if (!args.json.empty()) {
    std::string text = DumpDirectoryJson(dump, linked).dump(1) + "\n";
    Status written = args.json == "-" ? Status() : WriteFile(args.json, text);
    if (args.json == "-" && (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)) {
      return Fail(Error("cannot write the JSON to standard output"));
    }
    if (!written.ok()) return Fail(written);
    if (args.json == "-") return 0;
  }
  std::string text = DumpDirectoryText(dump, linked);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Fail(Error("cannot write to standard output"));
  }
  return 0;
}

}  // namespace xlens::cli
