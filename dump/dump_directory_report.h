// What `xlens inspect` says of a dump directory (dump_directory.h), as JSON and as text: the one
// rendering of the model that the command line prints and Python's xlens.inspect returns, so a
// script and a terminal read the same modules, stages and kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "compiler/support/status.h"
#include "dump/dump_directory.h"

namespace xlens {

// How a trace's kernel events linked to the dump's kernels (the command line links them with
// --trace); the report shows them beside the kernels.
struct DumpTraceLinks {
  struct KernelTime {
    int64_t events = 0;
    int64_t total_ns = 0;
  };
  std::string file;
  int64_t events = 0, kernel_events = 0, linked_events = 0;
  std::map<std::pair<int64_t, std::string>, KernelTime> times;  // (module id, kernel name)
};

// Reads `directory` as `xlens inspect` does: kernels derived from the optimized HLO of a dump
// without a manifest (xla_dump_kernels.h). A directory that is neither an xlens dump nor an XLA
// dump is an error, "inspect: " and the reader's first problem.
StatusOr<DumpDirectory> ReadDumpDirectoryForInspect(const std::string& directory);

// The model as `xlens inspect --json` writes it: every module with its stages in pipeline order
// (changed, wall time, files), its kernels (instruction, fusion, op_names, source, files), the
// TensorFlow graphs, what could not be placed and the problems. `trace` may be null.
nlohmann::json DumpDirectoryJson(const DumpDirectory& dump, const DumpTraceLinks* trace = nullptr);

// The text `xlens inspect` prints, names escaped for a terminal, long lists cut short.
std::string DumpDirectoryText(const DumpDirectory& dump, const DumpTraceLinks* trace = nullptr);

}  // namespace xlens
