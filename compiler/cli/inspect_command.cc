// `xlens inspect DIR [--trace FILE] [--json FILE]`: the model of a dump directory as the viewer
// shows it (dump_directory.h), for scripts and CI: modules, their stages in pipeline order, their
// kernels with op_name and the source line they came from, the files that could not be placed,
// and with --trace, how many of the trace's kernel events link to a kernel of the dump. The
// report (dump_directory_report.h) and the trace's links (dump_trace_links.h) are shared with
// Python's xlens.inspect.
#include <cstdio>
#include <optional>
#include <utility>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/support/file_io.h"
#include "compiler/tools/dump_trace_links.h"
#include "dump/dump_directory.h"
#include "dump/dump_directory_report.h"

namespace xlens::cli {

int RunInspect(const InspectArgs& args) {
  StatusOr<DumpDirectory> read = ReadDumpDirectoryForInspect(args.directory);
  if (!read.ok()) return Fail(read.status());
  const DumpDirectory& dump = *read;
  std::optional<DumpTraceLinks> trace;
  if (!args.trace.empty()) {
    StatusOr<DumpTraceLinks> linked = LinkTraceToDump(dump, args.trace);
    if (!linked.ok()) return Fail(linked.status());
    trace = std::move(linked).value();
  }
  const DumpTraceLinks* linked = trace ? &*trace : nullptr;
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
