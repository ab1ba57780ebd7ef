// libFuzzer target for the GraphDef reader, in both of TensorFlow's formats. The first byte says
// which (even: binary .pb, odd: text .pbtxt); the rest is the file. Any bytes must give a GraphDef
// or one clean line that names the file: no crash, no sanitizer report, no hang, no allocation
// beyond the constant limit. A GraphDef that reads must write and read back to the same bytes
// (the round-trip contract). Building a Graph from what reads (op signatures, edges, attrs) is
// covered by the broken-graph corpus and the hostile-input sweep, so that this target links the
// reader alone and not the whole op library.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/graph/graph_def_io.h"
#include "compiler/support/terminal_text.h"

namespace {

using xlens::graph::GraphDefFormat;

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, xlens::EscapeForTerminal(detail).c_str());
  std::abort();
}

void CheckRefusal(const xlens::Status& status, const std::string& name) {
  const std::string& message = status.message();
  if (message.rfind(name, 0) != 0) Die("message does not name the file", message);
  if (message.find('\n') != std::string::npos) Die("message is more than one line", message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const GraphDefFormat format = data[0] % 2 == 0 ? GraphDefFormat::kBinary : GraphDefFormat::kText;
  const std::string name = format == GraphDefFormat::kBinary ? "fuzz.pb" : "fuzz.pbtxt";
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Constants may not expand past what the fuzzer's memory limit allows.
  xlens::graph::GraphDefReadOptions options;
  options.max_constant_bytes = int64_t{64} << 20;
  auto graph = xlens::graph::ParseGraphDef(bytes, format, name, options);
  if (!graph.ok()) {
    CheckRefusal(graph.status(), name);
    return 0;
  }
  for (GraphDefFormat out : {GraphDefFormat::kBinary, GraphDefFormat::kText}) {
    auto written = xlens::graph::SerializeGraphDef(*graph, out);
    if (!written.ok()) Die("a GraphDef that read cannot be written", written.status().message());
    auto reread = xlens::graph::ParseGraphDef(*written, out, "written", options);
    if (!reread.ok()) Die("a written GraphDef does not read", reread.status().message());
    auto rewritten = xlens::graph::SerializeGraphDef(*reread, out);
    if (!rewritten.ok() || *rewritten != *written) Die("write(read(write(x))) != write(x)", *written);
  }
  return 0;
}
