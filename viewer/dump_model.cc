#include "viewer/dump_model.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_directory.h"
#include "viewer/hlo_outline.h"

namespace xlens::viewer {
namespace {

bool EndsWith(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What the manifest names but the directory lacks, by kind; said once per kind (with its count and
// first name) so a manifest listing 100,000 missing files makes one line, not 100,000.
struct FileProblems {
  std::vector<std::string> outside;      // messages for names that leave the directory
  std::vector<std::string> missing;      // paths
  std::vector<std::string> not_regular;  // "path (why)"
};

void CheckFilesPresent(const DumpModel& model, const std::vector<std::string>& files,
                       std::set<std::string>& reported, FileProblems& problems) {
  for (const std::string& file : files) {
    if (!reported.insert(file).second) continue;
    StatusOr<std::string> path = model.PathOf(file);
    if (!path.ok()) {
      problems.outside.push_back(path.status().message());
      continue;
    }
    std::string why;
    PathKind kind = GetPathKind(*path, &why);
    if (kind == PathKind::kMissing) {
      problems.missing.push_back(*path);
    } else if (kind != PathKind::kRegular) {
      problems.not_regular.push_back(DisplayPath(*path) + (why.empty() ? "" : " (" + why + ")"));
    }
  }
}

void ReportFileProblems(const std::string& directory, const FileProblems& problems, std::vector<std::string>& out) {
  const std::string manifest = DisplayPath(directory + "/" + std::string(kManifestFileName));
  if (problems.outside.size() == 1) out.push_back(problems.outside.front());
  if (problems.outside.size() > 1) {
    out.push_back(manifest + " names " + std::to_string(problems.outside.size()) +
                  " files that leave the dump directory; none read (first: " + problems.outside.front() + ")");
  }
  if (problems.missing.size() == 1) out.push_back(DisplayPath(problems.missing.front()) + ": named by manifest.json but missing");
  if (problems.missing.size() > 1) {
    out.push_back(manifest + " lists " + std::to_string(problems.missing.size()) +
                  " files that are missing (first: " + DisplayPath(problems.missing.front()) + ")");
  }
  if (problems.not_regular.size() == 1) {
    out.push_back(problems.not_regular.front() + ": named by manifest.json but not a regular file");
  }
  if (problems.not_regular.size() > 1) {
    out.push_back(manifest + " lists " + std::to_string(problems.not_regular.size()) +
                  " files that are not regular files (first: " + problems.not_regular.front() + ")");
  }
}

// The kernels of an XLA dump's optimized module, from the viewer's own HLO outline (the viewer
// links no compiler): as dump/xla_dump_kernels.h lists them (every instruction that runs code in
// the entry computation and in what its control flow runs), with their op_names and where they
// came from (the outline resolves the stack-frame table; a fusion without a location of its own
// takes its first fused instruction's that has one, as xlens inspect does).
StatusOr<std::vector<DerivedKernel>> OutlineKernels(std::string_view text, const std::string& file) {
  StatusOr<HloOutline> outline = ParseHloOutline(text, DisplayPath(file));
  if (!outline.ok()) return outline.status();
  static const std::set<std::string, std::less<>> kRunsNoCode = {
      "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "add-dependency", "opt-barrier"};
  std::vector<DerivedKernel> kernels;
  std::set<std::string> seen;
  std::vector<const HloOutlineComputation*> pending;
  if (const HloOutlineComputation* entry = outline->entry()) pending.push_back(entry);
  while (!pending.empty()) {
    const HloOutlineComputation* computation = pending.back();
    pending.pop_back();
    if (!seen.insert(computation->name).second) continue;
    for (const HloOutlineInstruction& instruction : computation->instructions) {
      if (kRunsNoCode.count(instruction.opcode)) continue;
      DerivedKernel derived;
      derived.kernel.name = instruction.name;
      derived.kernel.hlo_instruction = instruction.name;
      derived.opcode = instruction.opcode;
      derived.kernel.fusion_kind = instruction.fusion_kind;
      derived.kernel.op_names = instruction.op_names;
      // Callers bounded per kernel: a module of 100,000 kernels on a deep table stays small.
      constexpr size_t kMaxCallers = 16;
      derived.kernel.source = instruction.source;
      derived.kernel.stack = outline->CallersOf(instruction, kMaxCallers);
      if (instruction.opcode == "fusion" && !instruction.called.empty()) {
        derived.kernel.fusion_computation = instruction.called.front();
        const HloOutlineComputation* fused = outline->FindComputation(instruction.called.front());
        for (size_t i = 0; fused != nullptr && !derived.kernel.source && i < fused->instructions.size(); ++i) {
          derived.kernel.source = fused->instructions[i].source;
          derived.kernel.stack = outline->CallersOf(fused->instructions[i], kMaxCallers);
        }
      }
      kernels.push_back(std::move(derived));
      if (instruction.opcode == "while" || instruction.opcode == "conditional" || instruction.opcode == "call") {
        for (const std::string& called : instruction.called) {
          if (const HloOutlineComputation* next = outline->FindComputation(called)) pending.push_back(next);
        }
      }
    }
  }
  return kernels;
}

}  // namespace

std::unique_ptr<DumpModel> DumpModel::Open(const std::string& directory, std::string trace_path) {
  std::unique_ptr<DumpModel> model(new DumpModel());
  model->directory_ = directory;
  while (model->directory_.size() > 1 && model->directory_.back() == '/') model->directory_.pop_back();

  std::string why;
  PathKind kind = GetPathKind(model->directory_, &why);
  if (kind != PathKind::kDirectory) {
    model->problems_.push_back(model->directory_ + ": " +
                               (kind == PathKind::kMissing ? std::string("no such directory")
                                                           : "not a directory" + (why.empty() ? "" : " (" + why + ")")));
  } else {
    // The one entry point: manifest.json when there is one, else XLA's file names; an XLA dump's
    // kernels come from the viewer's outline of its optimized module.
    DumpDirectoryOptions options;
    options.derive_kernels = OutlineKernels;
    options.sources_for_manifest = false;  // a manifest's kernels carry their own source
    DumpDirectory dump = ReadDumpDirectory(model->directory_, options);
    const bool read = dump.source == DumpDirectory::Source::kManifest
                          ? dump.problems.empty()
                          : !dump.manifest.modules.empty() || !dump.manifest.graphs.empty();
    model->manifest_ = std::move(dump.manifest);
    model->has_manifest_ = read;
    model->from_xla_names_ = dump.source == DumpDirectory::Source::kXlaFileNames;
    for (std::string& problem : dump.problems) model->problems_.push_back(std::move(problem));
    // What could not be placed is one line, however many files: the rest is still shown.
    if (std::string unplaced = dump.UnplacedSummary(); !unplaced.empty()) model->problems_.push_back(std::move(unplaced));
  }

  if (trace_path.empty() && kind == PathKind::kDirectory) {
    for (const char* name : {"timeline.ctf.json", "timeline.ctf.json.gz", "timeline.json", "timeline.json.gz"}) {
      std::string candidate = model->directory_ + "/" + name;
      if (GetPathKind(candidate) == PathKind::kRegular) {
        trace_path = candidate;
        break;
      }
    }
  }
  model->trace_path_ = std::move(trace_path);

  // Say up front what the manifest names but the directory lacks, so a user sees it before
  // clicking through to an empty pane.
  std::set<std::string> reported;
  FileProblems file_problems;
  for (const ManifestModule& module : model->manifest_.modules) {
    CheckFilesPresent(*model, module.files, reported, file_problems);
    for (const ManifestStage& stage : module.stages) CheckFilesPresent(*model, stage.files, reported, file_problems);
    for (const ManifestKernel& kernel : module.kernels) CheckFilesPresent(*model, kernel.files, reported, file_problems);
  }
  for (const ManifestGraph& graph : model->manifest_.graphs) {
    for (const ManifestGraphStage& stage : graph.stages) CheckFilesPresent(*model, stage.files, reported, file_problems);
  }
  ReportFileProblems(model->directory_, file_problems, model->problems_);
  return model;
}

void DumpModel::AddProblem(std::string problem) { problems_.push_back(std::move(problem)); }

StatusOr<std::string> DumpModel::PathOf(const std::string& relative) const {
  std::filesystem::path path(relative);
  bool escapes = relative.empty() || path.is_absolute();
  for (const auto& part : path) {
    if (part == "..") escapes = true;
  }
  if (escapes) {
    return Error(DisplayPath(directory_ + "/manifest.json") + ": the file name \"" + DisplayText(relative) +
                 "\" leaves the dump directory; not read");
  }
  return directory_ + "/" + relative;
}

StatusOr<std::string> DumpModel::ReadDumpFile(const std::string& relative) const {
  StatusOr<std::string> path = PathOf(relative);
  if (!path.ok()) return path.status();
  return ReadFile(*path);
}

const ManifestModule* DumpModel::FindModuleByName(const std::string& name) const {
  const ManifestModule* found = nullptr;
  for (const ManifestModule& module : manifest_.modules) {
    if (module.name == name) found = &module;
  }
  return found;
}

std::string DumpModel::HloFileOf(const ManifestStage& stage) {
  for (const std::string& file : stage.files) {
    if (EndsWith(file, ".txt")) return file;
  }
  return "";
}

int DumpModel::BeforeOptimizationsFile(const ManifestModule& module) {
  for (int i = 0; i < static_cast<int>(module.files.size()); ++i) {
    if (EndsWith(module.files[i], ".before_optimizations.txt")) return i;
  }
  return -1;
}

int DumpModel::AfterOptimizationsFile(const ManifestModule& module) {
  for (int i = 0; i < static_cast<int>(module.files.size()); ++i) {
    if (EndsWith(module.files[i], "after_optimizations.txt")) return i;
  }
  return -1;
}

std::optional<StageRef> DumpModel::OptimizedStage(const ManifestModule& module) {
  if (int file = AfterOptimizationsFile(module); file >= 0) {
    return StageRef{StageRef::Kind::kModuleFile, module.id, -1, file};
  }
  if (int stage = PreviousStageWithFile(module, static_cast<int>(module.stages.size())); stage >= 0) {
    return StageRef{StageRef::Kind::kPass, module.id, -1, stage};
  }
  if (int file = BeforeOptimizationsFile(module); file >= 0) {
    return StageRef{StageRef::Kind::kModuleFile, module.id, -1, file};
  }
  return std::nullopt;
}

std::string DumpModel::HloFileOf(const ManifestModule& module, const StageRef& ref) {
  if (ref.kind == StageRef::Kind::kPass && ref.index >= 0 && ref.index < static_cast<int>(module.stages.size())) {
    return HloFileOf(module.stages[ref.index]);
  }
  if (ref.kind == StageRef::Kind::kModuleFile && ref.index >= 0 && ref.index < static_cast<int>(module.files.size())) {
    return module.files[ref.index];
  }
  return "";
}

std::string DumpModel::PreviousHloFile(const ManifestModule& module, const StageRef& ref) {
  int before = BeforeOptimizationsFile(module);
  if (ref.kind == StageRef::Kind::kPass) {
    int previous = PreviousStageWithFile(module, FirstStageOfRun(module, ref.index));
    if (previous >= 0) return HloFileOf(module.stages[previous]);
    return before >= 0 ? module.files[before] : "";
  }
  if (ref.kind == StageRef::Kind::kModuleFile && ref.index == AfterOptimizationsFile(module)) {
    int previous = PreviousStageWithFile(module, static_cast<int>(module.stages.size()));
    if (previous >= 0) return HloFileOf(module.stages[previous]);
    return before >= 0 ? module.files[before] : "";
  }
  return "";
}

std::string DumpModel::DotFileOf(const ManifestGraphStage& stage) {
  for (const std::string& file : stage.files) {
    if (EndsWith(file, ".dot")) return file;
  }
  return "";
}

int DumpModel::PreviousStageWithFile(const ManifestModule& module, int index) {
  for (int i = std::min<int>(index, module.stages.size()) - 1; i >= 0; --i) {
    if (!HloFileOf(module.stages[i]).empty()) return i;
  }
  return -1;
}

int DumpModel::FirstStageOfRun(const ManifestModule& module, int index) {
  if (index <= 0 || index >= static_cast<int>(module.stages.size())) return index;
  const std::string& name = module.stages[index].pass;
  if (name == module.stages[index].pipeline) return index;
  int first = index;
  while (first > 0 && module.stages[first - 1].pipeline == name) --first;
  return first;
}


const ManifestKernel* DumpModel::KernelOf(const ManifestModule& module, const std::string& instruction) {
  for (const ManifestKernel& kernel : module.kernels) {
    if (kernel.hlo_instruction == instruction) return &kernel;
  }
  return nullptr;
}

int DumpModel::CreatingStage(const ManifestModule& module, const std::string& instruction) {
  // The last stage that added it: a fusion that grows in place keeps its name, and a later pass
  // (multi-output fusion) may make a new one under a name an earlier pass used and dropped.
  int creating = -1;
  for (int i = 0; i < static_cast<int>(module.stages.size()); ++i) {
    const std::vector<std::string>& added = module.stages[i].changes.added;
    if (std::find(added.begin(), added.end(), instruction) != added.end()) creating = i;
  }
  if (creating >= 0) return creating;
  const ManifestKernel* kernel = KernelOf(module, instruction);
  if (kernel == nullptr || kernel->created_by_pass.empty()) return -1;
  for (int i = 0; i < static_cast<int>(module.stages.size()); ++i) {
    if (module.stages[i].pass == kernel->created_by_pass && module.stages[i].changed) return i;
  }
  return -1;
}

std::vector<std::pair<int64_t, std::string>> DumpModel::KernelsWithOpName(const std::string& op_name) const {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const ManifestModule& module : manifest_.modules) {
    for (const ManifestKernel& kernel : module.kernels) {
      for (const std::string& name : kernel.op_names) {
        // A graph op inside a function body is named "outer/inner" in op_name; a node of the
        // graph is the whole name or its last components.
        if (name == op_name || EndsWith(name, "/" + op_name)) {
          found.emplace_back(module.id, kernel.hlo_instruction);
          break;
        }
      }
    }
  }
  return found;
}


}  // namespace xlens::viewer
