// manifest.json: the index of a dump directory. Every module, every stage of its pipeline in
// order, every kernel, and the files of each, so the viewer and the bug bundle never guess from
// file names.
//
//   {"format": 1, "modules": [{"id": 1, "name": "m", "files": [...],
//     "stages": [{"step", "pipeline", "pass", "changed", "wall_ns", "files",
//                 "changes": {"added": [...], "removed": [...], "modified": [...],
//                             "fused_into": {"multiply.2": "fusion.3"}}}, ...],
//     "kernels": [{"name", "fusion_kind", "hlo_instruction", "fusion_computation",
//                  "op_names", "created_by_pass", "launch", "files",
//                  "source": {"file", "line", "column", "function"} or null,
//                  "stack": [{"file", "line", "column", "function"}, ...]}, ...],
//     "fusion_decisions": [{"step", "pass", "producer", "consumer", "fused", "kind",
//                           "fusion", "reason"}, ...],
//     "invocation": {"command_line": [...], "backend", "xla_flags", "tf_xla_flags"},
//     "executions": [{"execution": 1, "arguments": [{"file", "shape", "checksum", "bytes"}],
//                     "results": [...]}]}],
//    "graphs": [{"process", "id", "name",
//                "stages": [{"name": "mark_for_compilation", "files": [...]}, ...],
//                "clusters": [{"name": "cluster_0", "nodes": [...], "declustered": [...],
//                              "modules": ["cluster_0__XlaCompiledKernel_true_..._.1"]}],
//                "unclustered": {"node": "reason"}, "declustered": {"node": "reason"}}]}
//
// "graphs" (optional) are the TensorFlow graphs the clustering saw: a graph op -> its cluster ->
// the HLO modules the cluster compiled to (by name, as in "modules") -> their kernels (whose
// op_names are graph ops) is one chain, followable both ways. A graph is keyed by the writing
// process and its index there, so writers in several processes keep each other's graphs.
//
// A stage's "changes" say what the pass did to the module's top-level instructions (those of
// every computation that is not a fused computation, keyed by name); see ManifestStageChanges.
// It is left out when the stage changed nothing. "fusion_decisions" are the decisions of the
// fusion passes, as `xlens opt --explain-fusion` prints them, each with the step of the stage
// that took it.
//
// A kernel's "source" is where its instruction came from in the user's program (through the
// module's stack-frame table, or source_file/source_line metadata; for a fusion, the rule of
// KernelStack in compiler/hlo/stack_frames.h), null when unknown; "stack" is the frames above it,
// its callers, outermost last.
//
// File names are relative to the manifest's directory. Required fields: format, modules; a
// module's id and name; a stage's step, pipeline, pass and changed; a kernel's name; a fusion
// decision's step, pass, producer, consumer and fused. The rest default to empty or zero when
// absent. Unknown fields are ignored, so newer writers stay readable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

inline constexpr int kManifestFormat = 1;
inline constexpr std::string_view kManifestFileName = "manifest.json";

// What one stage did to the module's top-level instructions, by instruction name (each list
// sorted). The viewer computes the same from the stage's dumps (stage_diff.h), so the definitions
// are shared:
//   added      top-level only after the stage;
//   removed    top-level only before it, and not fused;
//   fused_into top-level before, not after, and inside the fused computation of the top-level
//              fusion named as the value (through nested fusions; of several, the smallest name);
//   modified   top-level before and after, printed differently (the text without "ROOT "; for a
//              fusion, its fused computation's text too).
struct ManifestStageChanges {
  std::vector<std::string> added, removed, modified;
  std::map<std::string, std::string> fused_into;  // instruction -> fusion
  bool empty() const {
    return added.empty() && removed.empty() && modified.empty() && fused_into.empty();
  }
  bool operator==(const ManifestStageChanges&) const = default;
};

struct ManifestStage {
  int64_t step = 0;  // order of the stage within its module
  std::string pipeline;
  std::string pass;
  bool changed = false;
  int64_t wall_ns = 0;
  std::vector<std::string> files;
  ManifestStageChanges changes;  // empty when the stage changed nothing
  bool operator==(const ManifestStage&) const = default;
};

// One decision of a fusion pass (FusionDecision in compiler/passes/fusion_utils.h).
struct ManifestFusionDecision {
  int64_t step = 0;      // the step of the stage (the pass run) that took it
  std::string pass;      // "fusion", "multi-output-fusion", ...
  std::string producer;  // the instruction fused in (for sibling fusion: the one merged in)
  std::string consumer;  // the consumer, as named when decided
  bool fused = false;
  std::string kind;      // for a fusion: "kLoop", "kInput" or "kOutput"
  std::string fusion;    // for a fusion: the fusion instruction it made or grew
  std::string reason;    // why it was refused; for a fusion, a note (may be empty)
  bool operator==(const ManifestFusionDecision&) const = default;
};

// One frame of a kernel's source: a line of the user's program.
struct ManifestSourceFrame {
  std::string file;
  int64_t line = 0;
  int64_t column = 0;     // 0 when unknown
  std::string function;   // empty when unknown
  bool operator==(const ManifestSourceFrame&) const = default;
};

struct ManifestKernel {
  std::string name;                   // the kernel's symbol
  std::string fusion_kind;            // "kLoop", "kInput", ...; empty for a non-fusion kernel
  std::string hlo_instruction;        // the instruction it implements ("fusion.3")
  std::string fusion_computation;     // the fused computation ("fused_computation.3")
  std::vector<std::string> op_names;  // metadata op_name of every graph op inside
  std::string created_by_pass;        // the pass that made the fusion
  // How the kernel is launched: "2 phases: 4096 tasks x 1000 elements, ..." on the CPU, grid and
  // block on a GPU; empty before code generation.
  std::string launch;
  std::vector<std::string> files;
  std::optional<ManifestSourceFrame> source;  // nullopt: not known
  std::vector<ManifestSourceFrame> stack;     // the callers of `source`, outermost last
  bool operator==(const ManifestKernel&) const = default;
};

// One tensor of an execution snapshot (--xla_dump_hlo_snapshots): a .npy file beside the dumps.
struct ManifestTensor {
  std::string file;
  std::string shape;     // "f32[2,3]", as the HLO printer writes it (without the layout)
  std::string checksum;  // "crc32:0a1b2c3d" of the file's bytes
  int64_t bytes = 0;     // the file's size
  bool operator==(const ManifestTensor&) const = default;
};

// One execution of a module: its arguments and results (tuple leaves in order).
struct ManifestExecution {
  int64_t execution = 0;  // 1 for the first execution of the module
  std::vector<ManifestTensor> arguments;
  std::vector<ManifestTensor> results;
  bool operator==(const ManifestExecution&) const = default;
};

// How the module was compiled: what a replay needs to compile it the same way.
struct ManifestInvocation {
  std::vector<std::string> command_line;  // the process's arguments
  std::string backend;                    // "cpu", "gpu", ...; empty when unknown
  std::string xla_flags;                  // the XLA flags in effect that differ from defaults
  std::string tf_xla_flags;               // the same for TF_XLA_FLAGS
  bool empty() const { return command_line.empty() && backend.empty() && xla_flags.empty() && tf_xla_flags.empty(); }
  bool operator==(const ManifestInvocation&) const = default;
};

struct ManifestModule {
  int64_t id = 0;
  std::string name;
  // "process": the id of the process that claimed the module and writes its files; 0 (absent)
  // when unknown. A writer that is gone left its files for the next writer to list
  // (ManifestWriter::ListFilesOfEndedWriters).
  int64_t process = 0;
  std::vector<std::string> files;
  std::vector<ManifestStage> stages;
  std::vector<ManifestKernel> kernels;
  std::vector<ManifestFusionDecision> fusion_decisions;
  ManifestInvocation invocation;              // "invocation"; absent when empty
  std::vector<ManifestExecution> executions;  // "executions"; absent when empty
  bool operator==(const ManifestModule&) const = default;
};

struct ManifestGraphStage {
  std::string name;  // the clustering pass ("mark_for_compilation", "build_xla_ops", ...)
  std::vector<std::string> files;
  bool operator==(const ManifestGraphStage&) const = default;
};

struct ManifestCluster {
  std::string name;
  std::vector<std::string> nodes;        // as mark_for_compilation assigned them
  std::vector<std::string> declustered;  // of those, the ones taken out afterwards
  std::vector<std::string> modules;      // HLO modules it compiled to
  bool operator==(const ManifestCluster&) const = default;
};

struct ManifestGraph {
  int64_t process = 0;  // the writer's process id
  int64_t id = 0;       // the graph's index in that process
  std::string name;
  std::vector<ManifestGraphStage> stages;
  std::vector<ManifestCluster> clusters;
  std::map<std::string, std::string> unclustered;  // node -> why
  std::map<std::string, std::string> declustered;  // node -> why
  bool operator==(const ManifestGraph&) const = default;
};

struct Manifest {
  int format = kManifestFormat;
  std::vector<ManifestModule> modules;
  std::vector<ManifestGraph> graphs;
  bool operator==(const Manifest&) const = default;

  // The module with this id, or nullptr.
  const ManifestModule* FindModule(int64_t id) const;
};

// The manifest as indented JSON.
std::string ManifestToJson(const Manifest& manifest);

// Parses manifest JSON. Errors say where: "line 3, column 7: ..." for broken JSON,
// "modules[0].stages[2]: missing \"pass\"" for a missing field, and so on. Any bytes give a
// manifest or one error line: nothing throws (a number past the range of a double, 1e400, is an
// error like any other).
StatusOr<Manifest> ParseManifest(std::string_view text);

// Reads and parses a manifest file; errors start with the path. Only a regular file within the
// input size limit is read (file_io.h), so a FIFO or a huge file is refused, never waited on.
StatusOr<Manifest> ReadManifest(const std::string& path);

// Collects the records of one writer and writes them into `directory`/manifest.json. Writing
// merges with what is already there (other modules, earlier processes): modules are keyed by
// id, ours replace theirs, the rest are kept in order. An existing manifest that cannot be read
// is moved aside to manifest.json.corrupt.N with a warning, never silently dropped. Something
// other than a regular file at that path (a FIFO, a directory) is left alone: Write fails with a
// reason and writes nothing. The read-merge-write is done under a lock on the directory, so
// writers in several processes do not lose each other's modules; a manifest that has not changed
// since this writer wrote it is not read again, so writing after every dumped file stays cheap.
class ManifestWriter {
 public:
  explicit ManifestWriter(std::string directory);

  // Adds a module (or renames the one with this id) and returns it; the reference is valid until
  // the next Add call.
  ManifestModule& AddModule(int64_t id, std::string name);
  // The following add to the module with `module_id`, adding it nameless if it is new.
  void AddModuleFile(int64_t module_id, std::string file);
  void AddStage(int64_t module_id, ManifestStage stage);
  void AddKernel(int64_t module_id, ManifestKernel kernel);
  void AddFusionDecision(int64_t module_id, ManifestFusionDecision decision);
  void SetInvocation(int64_t module_id, ManifestInvocation invocation);
  void AddExecution(int64_t module_id, ManifestExecution execution);
  // Adds (or replaces) a clustered graph, keyed by process and id.
  void AddGraph(ManifestGraph graph);
  // Records that `cluster` compiled to `module`, in the latest graph of ours holding the cluster;
  // false when none does.
  bool AddClusterModule(const std::string& cluster, const std::string& module);

  // Merges and writes atomically. An error means the file could not be written.
  Status Write();

  // What ClaimModule found and did.
  struct Claim {
    int64_t id = 0;
    // The module was recorded under `id` (and the manifest written); false when the directory
    // already held `max_modules` modules.
    bool recorded = false;
    // The modules the directory held before this one.
    int64_t modules_present = 0;
    // Why the claim could not be recorded in the manifest, when it could not (it is still unique
    // among this process's claims and the files present).
    std::string problem;
  };
  // Gives a new module the next id of the directory and records it, under the directory's lock so
  // that processes dumping into one directory at once never take the same id: one more than the
  // highest of `at_least - 1`, the ids in the manifest and `ids_in_use()` (the ids of the dump
  // files present, which a killed process may have left unlisted). When `max_modules` >= 0 and
  // the directory already holds that many modules, the module is not recorded.
  Claim ClaimModule(std::string name, int64_t at_least, int64_t max_modules,
                    const std::function<std::set<int64_t>()>& ids_in_use);

  // Lists, in the manifest on disk, the dump files of modules whose writing process has ended
  // but which it never listed (it was killed between writing a file and writing the manifest):
  // each is added to its module's "files". Only files named for a module the manifest holds, with
  // a recorded process that no longer runs, are taken: a live writer lists its own. Returns the
  // files listed. `module_id_of` gives the module id a file name is for (-1: none).
  std::vector<std::string> ListFilesOfEndedWriters(const std::function<int64_t(std::string_view)>& module_id_of);

  // What this writer's records are (not merged with the file).
  const Manifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }
  // Problems that did not stop the write (a corrupt manifest moved aside).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  ManifestModule& ModuleWithId(int64_t id);
  // The manifest on disk (empty when there is none), for a caller holding the lock. A corrupt
  // one is moved aside with a warning; an error means the path is not ours to write.
  StatusOr<Manifest> ReadLocked();
  // Merges our records into `on_disk` and writes it, for a caller holding the lock.
  Status WriteLocked(Manifest on_disk);

  std::string directory_;
  std::string path_;
  Manifest manifest_;
  std::vector<std::string> warnings_;
  // What this writer last wrote, and the identity of the file it wrote (device, inode, size,
  // modification time): while the file is still that one, it holds `last_written_`.
  std::optional<Manifest> last_written_;
  struct FileIdentity {
    uint64_t device = 0, inode = 0;
    int64_t size = 0, mtime_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };
  static std::optional<FileIdentity> IdentityOf(const std::string& path);
  FileIdentity last_identity_;
};

}  // namespace xlens
