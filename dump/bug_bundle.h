// A bug bundle: one .tar.gz holding everything someone else needs to see and replay a problem
// (`xlens bundle`): the dump directory's manifest and modules (before and after optimization),
// the per-pass dumps, LLVM IR, PTX, thunk sequences, buffer assignments, execution snapshots
// (--xla_dump_hlo_snapshots), the clustering graphs, a trace, and environment.json (xlens, the
// machine, and how each module was compiled: its command line and every flag in effect).
//
// Only files the manifest lists are taken, each by a name relative to the dump directory (an
// absolute or `..` name there is skipped and reported: a manifest does not choose what leaves the
// machine). No symbolic link is followed, in the dump directory or under --graphs: a link there
// is left out and reported, never what it points to. The bundle's own manifest.json is the
// dump's, less what was left out, so the viewer opens an unpacked bundle as it opens a dump
// directory.
//
// Over `max_bytes` the largest optional parts go first, whole: the per-pass dumps, then the
// trace; what went is listed. `strip_constants` elides constants of more than a few elements in
// the HLO text as XLA prints them, `{...}`, and leaves out what would still hold their values
// (LLVM IR, PTX, .dot, .html), so private weights are not attached; such a bundle can be read but
// not replayed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

inline constexpr std::string_view kBundleEnvironmentFile = "environment.json";

struct BundleOptions {
  std::string dump_dir;
  std::string output;      // the .tar.gz, written as it is made (an atomic write: file_io.h)
  std::string trace;       // a Chrome trace to add as trace/NAME; empty: none
  std::string graphs_dir;  // clustering graph dumps ($TF_DUMP_GRAPH_PREFIX) to add as graphs/NAME
  int64_t max_bytes = -1;  // -1: no limit
  bool strip_constants = false;
  // Facts the dump layer cannot know, written into environment.json in this order: "xlens"
  // (version, commit) and "host" (OS, CPU model and features, LLVM version, CUDA driver, GPU).
  std::vector<std::pair<std::string, std::string>> xlens;
  std::vector<std::pair<std::string, std::string>> host;
  std::vector<std::string> command_line;  // of the bundling command
};

struct BundleEntry {
  std::string name;
  int64_t bytes = 0;  // uncompressed
};

struct Bundle {
  int64_t size = 0;                  // of the .tar.gz written
  std::vector<BundleEntry> entries;  // in archive order
  std::vector<std::string> dropped;  // what was left out and why, one line each
};

// Writes the bundle of a dump directory to `options.output`. The files are read as they are
// packed and the archive streams to the output, so neither is held whole (but a file whose
// constants are elided). Errors: no manifest, an unreadable manifest, a bundle that stays over
// the size limit without its optional parts, a file that changed while it was packed, an
// output that cannot be written, no libarchive in this build; the output is then as it was.
StatusOr<Bundle> MakeBundle(const BundleOptions& options);

// HLO text with every constant of more than `max_elements` elements printed as `{...}`.
std::string ElideLargeConstants(std::string_view hlo_text, int64_t max_elements = 8);

}  // namespace xlens
