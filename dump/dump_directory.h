// The one way into a dump directory: xlens's own (manifest.json) or one XLA wrote (jaxlib,
// TensorFlow, PyTorch/XLA; no manifest), read into the same model, so the CLI (`xlens inspect`),
// the viewer and Python see the same modules, stages and kernels whoever wrote the files.
//
// Without a manifest the model is rebuilt from XLA's file names (xla_dump_names.h): one module
// per module_NNNN (and name), its per-pass dumps as stages in XLA's step order, its other files
// (before/after_optimizations, reports, IR, PTX, thunks, debug_options, the module directory's
// files) as the module's files, TensorFlow's graph dumps as one graph's clustering stages.
// Kernels come from the module as compiled when the caller can read HLO (`derive_kernels`; the
// viewer, which links no compiler, passes none). Every entry of the directory is either placed or
// listed in `unplaced` with why: a name of no known kind, a link (never followed), something
// that is not a regular file, a directory that is not a module's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/support/status.h"
#include "dump/manifest.h"

namespace xlens {

// Where an instruction came from, as its metadata says (stack_frame_id or source_file/line).
struct DumpSourceLocation {
  std::string file;
  int64_t line = 0;
  std::string function;
  // Empty when the kernel's own instruction says it; else whose location it is ("fused
  // instruction n.2", "user while.3", "operand p.1"): XLA gives the copies and wrappers it adds
  // no metadata, and the nearest instruction that has some stands in, said as such.
  std::string via;
  bool operator==(const DumpSourceLocation&) const = default;
};

struct DerivedKernel {
  ManifestKernel kernel;
  std::optional<DumpSourceLocation> source;
  std::string opcode;  // the instruction's ("fusion", "custom-call", "dot", "copy", ...)
};

// Reads the kernels of a module as compiled from its HLO text; the CLI passes the HLO parser's
// (xla_dump_kernels.h). An error leaves the module without kernels and is one problem line.
using KernelDeriver = std::function<StatusOr<std::vector<DerivedKernel>>(std::string_view hlo_text,
                                                                         const std::string& file_name)>;

struct UnplacedDumpFile {
  std::string file;    // relative to the directory
  std::string reason;  // why it is not part of the model
  bool operator==(const UnplacedDumpFile&) const = default;
};

struct DumpDirectoryOptions {
  KernelDeriver derive_kernels;  // empty: kernels only from a manifest
  // Also run `derive_kernels` on a manifest's optimized modules, for its kernels' source lines.
  bool sources_for_manifest = true;
  // Entries read from a directory (XLA dumps only) before the rest are left uncounted.
  int64_t max_entries = 1'000'000;
};

struct DumpDirectory {
  enum class Source { kNone, kManifest, kXlaFileNames };
  std::string directory;
  Source source = Source::kNone;
  Manifest manifest;
  // (module id, kernel name) -> where the kernel's instruction came from, where known.
  std::map<std::pair<int64_t, std::string>, DumpSourceLocation> kernel_sources;
  // (module id, kernel name) -> the opcode of its instruction, for kernels derived from HLO.
  std::map<std::pair<int64_t, std::string>, std::string> kernel_opcodes;
  std::vector<UnplacedDumpFile> unplaced;
  // What could not be read, one line each ("FILE: what"): the directory, the manifest, an
  // optimized module whose kernels could not be derived.
  std::vector<std::string> problems;
  // Files placed in the model (XLA dumps), so callers can say "N of M files placed".
  int64_t placed_files = 0;

  const DumpSourceLocation* KernelSource(int64_t module_id, const std::string& kernel) const;
  // "kLoop" (a fusion's kind), else the instruction's opcode where known, else "kernel".
  std::string KernelKind(int64_t module_id, const ManifestKernel& kernel) const;
  // One line for all unplaced files ("N files of DIR not placed: FILE (why), ..."), or empty.
  std::string UnplacedSummary(size_t examples = 3) const;
};

// Reads `directory`: its manifest.json when there is one (its problems are the manifest reader's),
// else XLA's file names. Never fails outright: what cannot be read is in `problems`.
DumpDirectory ReadDumpDirectory(const std::string& directory, const DumpDirectoryOptions& options = {});

}  // namespace xlens
