// graphdef_roundtrip IN OUT: reads a GraphDef (.pb or .pbtxt, or an encapsulate_fdef_*.pbtxt
// FunctionDef with --function) and writes it back in the format OUT's extension names. The
// TensorFlow compatibility test (tf_roundtrip_test.py) reads what this writes with TensorFlow.
#include <cstdio>
#include <string>

#include "compiler/graph/graph_def_io.h"
#include "compiler/support/file_io.h"

int main(int argc, char** argv) {
  using namespace xlens::graph;
  bool function = false;
  std::string in, out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--function") {
      function = true;
    } else if (in.empty()) {
      in = arg;
    } else if (out.empty()) {
      out = arg;
    } else {
      in.clear();
      break;
    }
  }
  if (in.empty() || out.empty()) {
    std::fprintf(stderr, "usage: graphdef_roundtrip [--function] IN OUT\n");
    return 2;
  }
  xlens::Status status;
  if (function) {
    auto def = ReadFunctionDef(in);
    if (!def.ok()) {
      status = def.status();
    } else {
      auto bytes = SerializeFunctionDef(*def, GraphDefFormatForPath(out) == GraphDefFormat::kBinary
                                                  ? GraphDefFormat::kBinary
                                                  : GraphDefFormat::kText);
      status = bytes.ok() ? xlens::WriteFile(out, *bytes) : bytes.status();
    }
  } else {
    auto def = ReadGraphDef(in);
    status = def.ok() ? WriteGraphDef(out, *def) : def.status();
  }
  if (!status.ok()) {
    std::fprintf(stderr, "graphdef_roundtrip: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
