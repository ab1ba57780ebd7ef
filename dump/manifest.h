// manifest.json: the index of a dump directory. Every module, every stage of its pipeline in
// order, every kernel, and the files of each, so the viewer and the bug bundle never guess from
// file names.
//
//   {"format": 1, "modules": [{"id": 1, "name": "m", "files": [...],
//     "stages": [{"step", "pipeline", "pass", "changed", "wall_ns", "files"}, ...],
//     "kernels": [{"name", "fusion_kind", "hlo_instruction", "fusion_computation",
//                  "op_names", "created_by_pass", "launch", "files"}, ...]}]}
//
// File names are relative to the manifest's directory. Required fields: format, modules; a
// module's id and name; a stage's step, pipeline, pass and changed; a kernel's name. The rest
// default to empty or zero when absent. Unknown fields are ignored, so newer writers stay
// readable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

inline constexpr int kManifestFormat = 1;
inline constexpr std::string_view kManifestFileName = "manifest.json";

struct ManifestStage {
  int64_t step = 0;  // order of the stage within its module
  std::string pipeline;
  std::string pass;
  bool changed = false;
  int64_t wall_ns = 0;
  std::vector<std::string> files;
  bool operator==(const ManifestStage&) const = default;
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
  bool operator==(const ManifestKernel&) const = default;
};

struct ManifestModule {
  int64_t id = 0;
  std::string name;
  std::vector<std::string> files;
  std::vector<ManifestStage> stages;
  std::vector<ManifestKernel> kernels;
  bool operator==(const ManifestModule&) const = default;
};

struct Manifest {
  int format = kManifestFormat;
  std::vector<ManifestModule> modules;
  bool operator==(const Manifest&) const = default;

  // The module with this id, or nullptr.
  const ManifestModule* FindModule(int64_t id) const;
};

// The manifest as indented JSON.
std::string ManifestToJson(const Manifest& manifest);

// Parses manifest JSON. Errors say where: "line 3, column 7: ..." for broken JSON,
// "modules[0].stages[2]: missing \"pass\"" for a missing field, and so on.
StatusOr<Manifest> ParseManifest(std::string_view text);

// Reads and parses a manifest file; errors start with the path.
StatusOr<Manifest> ReadManifest(const std::string& path);

// Collects the records of one writer and writes them into `directory`/manifest.json. Writing
// merges with what is already there (other modules, earlier processes): modules are keyed by
// id, ours replace theirs, the rest are kept in order. An existing manifest that cannot be read
// is moved aside to manifest.json.corrupt.N with a warning, never silently dropped. The
// read-merge-write is done under a lock on the directory, so writers in several processes do
// not lose each other's modules.
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

  // Merges and writes atomically. An error means the file could not be written.
  Status Write();

  // What this writer's records are (not merged with the file).
  const Manifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }
  // Problems that did not stop the write (a corrupt manifest moved aside).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  ManifestModule& ModuleWithId(int64_t id);

  std::string directory_;
  std::string path_;
  Manifest manifest_;
  std::vector<std::string> warnings_;
};

}  // namespace xlens
