// libFuzzer target for the names of XLA's dump files (dump/xla_dump_names.h): a directory someone
// else wrote is read name by name, so any bytes must be classified, never crash or throw. The
// first byte says whether the name is a directory's. A placed name keeps to its kind's promises
// (a pass has a step and a pass name; what is not placed says why), and the parts it gives back
// are pieces of the name.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dump/xla_dump_names.h"

namespace {

void Require(bool condition, const char* what, const std::string& name) {
  if (condition) return;
  std::fprintf(stderr, "%s: %s\n", what, name.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool directory = data[0] & 1;
  std::string name(reinterpret_cast<const char*>(data) + 1, size - 1);
  xlens::XlaDumpFileName parsed = xlens::ParseXlaDumpFileName(name, directory);
  using Kind = xlens::XlaDumpFileKind;
  if (parsed.kind == Kind::kUnknown) {
    Require(!parsed.reason.empty(), "unplaced without a reason", name);
    return 0;
  }
  Require(parsed.reason.empty(), "placed with a reason", name);
  Require(parsed.module_name.size() <= name.size() && parsed.suffix.size() <= name.size(), "parts longer than the name",
          name);
  if (!parsed.module_name.empty()) Require(name.find(parsed.module_name) != std::string::npos, "a name not in the name", name);
  if (parsed.kind == Kind::kPass) {
    Require(parsed.step >= 0 && !parsed.pass.empty() && !parsed.pipeline.empty(), "a pass without its parts", name);
  }
  if (parsed.kind == Kind::kTensorFlowGraph) {
    Require(parsed.module_id == -1 && !parsed.graph_stage.empty(), "a graph dump without its stage", name);
  } else {
    Require(parsed.module_id >= 0, "a module file without a module id", name);
  }
  xlens::KernelOfKernelModule(parsed.kernel);
  return 0;
}
