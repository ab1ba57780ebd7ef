// What the viewer knows of a dump directory: its manifest.json or, for a dump XLA wrote, the same
// model rebuilt from XLA's file names (both through dump/'s one entry point), the files
// it names, and the trace beside it. Opening never fails outright: a broken or missing manifest, a
// file it names that is gone or unreadable, all become problems (one line each: the file and what
// was wrong) that the window shows and the command line prints, and the rest is still shown.
//
// The manifest is the index (DESIGN.md, Dump directory); without one, dump/ reads XLA's names.
// File names in it are relative to the directory; a name that leaves the directory (absolute, or
// with a ".." component) is refused as a problem, never read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/status.h"
#include "dump/manifest.h"

namespace xlens::viewer {

// One entry of the Stages pane, in pipeline order: a clustering stage of a TensorFlow graph, a
// pass of a module's pipeline, or a kernel of a module.
struct StageRef {
  // kModuleFile: the module before or after the whole pipeline (XLA's before_optimizations and
  // *after_optimizations dumps), which exist without per-pass dumps.
  enum class Kind { kGraphStage, kPass, kKernel, kModuleFile };
  Kind kind = Kind::kPass;
  int64_t module_id = 0;    // kPass, kKernel, kModuleFile
  int graph_index = -1;     // kGraphStage: index into manifest().graphs
  int index = 0;            // into the module's stages / kernels / files, or the graph's stages
  bool operator==(const StageRef&) const = default;
};

class DumpModel {
 public:
  // Opens `directory` (its manifest.json, or XLA's dump files). `trace_path` empty: the trace is the directory's
  // timeline.ctf.json (or .json.gz) when there is one.
  static std::unique_ptr<DumpModel> Open(const std::string& directory, std::string trace_path = "");

  const std::string& directory() const { return directory_; }
  const Manifest& manifest() const { return manifest_; }
  // Whether a model was read: a readable manifest.json, or XLA's dump files without one.
  bool has_manifest() const { return has_manifest_; }
  // The model was rebuilt from XLA's file names (no manifest.json).
  bool from_xla_names() const { return from_xla_names_; }
  // The trace to show, or empty when there is none.
  const std::string& trace_path() const { return trace_path_; }
  // Everything that could not be read, as "FILE: what".
  const std::vector<std::string>& problems() const { return problems_; }
  void AddProblem(std::string problem);

  // The path of a file the manifest names; an error for a name that leaves the directory.
  StatusOr<std::string> PathOf(const std::string& relative) const;
  // Reads a file the manifest names (the input size limit holds); errors name the file.
  StatusOr<std::string> ReadDumpFile(const std::string& relative) const;

  const ManifestModule* FindModule(int64_t id) const { return manifest_.FindModule(id); }
  // The module whose name is `name` (the trace's "module" argument), or nullptr. Several
  // modules may share a name (recompilation): the last one wins, as its kernels are the ones run.
  const ManifestModule* FindModuleByName(const std::string& name) const;

  // The module's before_optimizations.txt and *after_optimizations.txt among its files (index),
  // or -1.
  static int BeforeOptimizationsFile(const ManifestModule& module);
  static int AfterOptimizationsFile(const ManifestModule& module);
  // The stage that shows the module as compiled (the one the kernels and the trace name): its
  // after_optimizations dump, else its last dumped pass; nullopt when it has neither.
  static std::optional<StageRef> OptimizedStage(const ManifestModule& module);
  // The HLO file a stage shows (pass or module file), or empty.
  static std::string HloFileOf(const ManifestModule& module, const StageRef& ref);
  // The HLO file of the stage before `ref` (for the diff), or empty: for a pass, the closest
  // earlier dumped pass, else before_optimizations; for after_optimizations, the last dumped pass.
  static std::string PreviousHloFile(const ManifestModule& module, const StageRef& ref);

  // The HLO text file of a stage (its first .txt file), or empty.
  static std::string HloFileOf(const ManifestStage& stage);
  // The DOT file of a clustering stage (its first .dot file), or empty.
  static std::string DotFileOf(const ManifestGraphStage& stage);
  // The index of the stage whose dump shows the module as it was before stage `index` ran: the
  // closest earlier stage with an HLO file; -1 when there is none.
  static int PreviousStageWithFile(const ManifestModule& module, int index);
  // A nested pipeline is a stage of the pipeline around it, recorded after its own passes; its
  // change is the net change of the whole run. The index of the first stage of that run (its
  // inner stages come just before it), or `index` itself for a plain pass.
  static int FirstStageOfRun(const ManifestModule& module, int index);

  // The kernel that implements `instruction` in `module`, or nullptr.
  static const ManifestKernel* KernelOf(const ManifestModule& module, const std::string& instruction);
  // The stage (index) that created `instruction`: the first stage whose change record lists it as
  // added, else the stage named by a kernel's created_by_pass; -1 when unknown.
  static int CreatingStage(const ManifestModule& module, const std::string& instruction);

  // The (module id, instruction) pairs of kernels whose op_names include `op_name` (a graph op's
  // name): how a clustering-stage node links to the HLO it became.
  std::vector<std::pair<int64_t, std::string>> KernelsWithOpName(const std::string& op_name) const;


 private:
  DumpModel() = default;

  std::string directory_;
  std::string trace_path_;
  Manifest manifest_;
  bool has_manifest_ = false;
  bool from_xla_names_ = false;
  std::vector<std::string> problems_;
};

}  // namespace xlens::viewer
