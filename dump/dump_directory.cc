#include "dump/dump_directory.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <tuple>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_names.h"
#include "dump/xla_dump_names.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;

// One entry of the directory as listed, without following links.
struct Entry {
  std::string name;
  fs::file_type type = fs::file_type::unknown;
};

std::string TypeReason(fs::file_type type) {
  switch (type) {
    case fs::file_type::symlink: return "a symbolic link; not followed";
    case fs::file_type::fifo: return "a FIFO, not a regular file; not read";
    case fs::file_type::socket: return "a socket, not a regular file; not read";
    case fs::file_type::block:
    case fs::file_type::character: return "a device, not a regular file; not read";
    default: return "not a regular file; not read";
  }
}

// The directory's entries, sorted by name; at most `max_entries` (the rest counted in `more`).
std::vector<Entry> ListEntries(const std::string& directory, int64_t max_entries, int64_t& more,
                               std::string& error) {
  std::vector<Entry> entries;
  std::error_code ec;
  fs::directory_iterator it(directory, ec), end;
  if (ec) {
    error = ec.message();
    return entries;
  }
  // An error while listing ends the listing (the iterator is not promised to reach the end).
  for (; it != end && !ec; it.increment(ec)) {
    if (static_cast<int64_t>(entries.size()) >= max_entries) {
      ++more;
      continue;
    }
    std::error_code type_ec;
    fs::file_status status = it->symlink_status(type_ec);
    entries.push_back({it->path().filename().string(), type_ec ? fs::file_type::unknown : status.type()});
  }
  if (ec) error = ec.message();
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

std::string Underscored(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The order TensorFlow's clustering writes its graphs in (DESIGN.md, Dump directory).
int ClusteringOrder(const std::string& stage) {
  static const char* const kOrder[] = {"before_increase_dynamism_for_auto_jit_pass",
                                       "before_mark_for_compilation",
                                       "mark_for_compilation",
                                       "mark_for_compilation_annotated",
                                       "partially_decluster",
                                       "encapsulate_subgraphs_before",
                                       "encapsulate_subgraphs_after",
                                       "build_xla_ops"};
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i) {
    if (stage == kOrder[i]) return i;
  }
  return static_cast<int>(std::size(kOrder));
}

struct PendingFile {
  std::string file;  // relative to the directory
  XlaDumpFileName name;
};

struct PendingModule {
  int64_t id = 0;
  std::string name;
  std::string timestamp;
  std::vector<PendingFile> files;
};

bool IsCanonicalKind(XlaDumpFileKind kind) {
  return kind == XlaDumpFileKind::kBeforeOptimizations || kind == XlaDumpFileKind::kAfterOptimizations ||
         kind == XlaDumpFileKind::kPass || kind == XlaDumpFileKind::kModuleReport ||
         kind == XlaDumpFileKind::kDebugOptions || kind == XlaDumpFileKind::kModuleDirectory ||
         kind == XlaDumpFileKind::kThunkSequence;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

void DeriveKernels(DumpDirectory& out, ManifestModule& module, const std::string& hlo_file,
                   const DumpDirectoryOptions& options, bool replace_kernels) {
  const std::string path = out.directory + "/" + hlo_file;
  if (GetPathKind(path) != PathKind::kRegular) return;
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    out.problems.push_back(FirstLine(text.status().message()));
    return;
  }
  StatusOr<std::vector<DerivedKernel>> kernels = options.derive_kernels(*text, path);
  if (!kernels.ok()) {
    out.problems.push_back(DisplayPath(path) + ": kernels not derived: " + FirstLine(kernels.status().message()));
    return;
  }
  for (DerivedKernel& derived : *kernels) {
    if (replace_kernels) {
      if (derived.source) out.kernel_sources[{module.id, derived.kernel.name}] = *derived.source;
      if (!derived.opcode.empty()) out.kernel_opcodes[{module.id, derived.kernel.name}] = derived.opcode;
      module.kernels.push_back(std::move(derived.kernel));
      continue;
    }
    // A manifest's kernels keep their own names; the source comes through the instruction.
    for (const ManifestKernel& kernel : module.kernels) {
      if (kernel.hlo_instruction == derived.kernel.hlo_instruction && derived.source) {
        out.kernel_sources[{module.id, kernel.name}] = *derived.source;
      }
    }
  }
}

bool IsOptimizedHlo(const std::string& file) {
  return file.ends_with("after_optimizations.txt");
}

void ReadManifestDirectory(DumpDirectory& out, const DumpDirectoryOptions& options) {
  StatusOr<Manifest> manifest = ReadManifest(out.directory + "/" + std::string(kManifestFileName));
  if (!manifest.ok()) {
    out.problems.push_back(manifest.status().message());
    return;
  }
  out.manifest = std::move(*manifest);
  if (!options.derive_kernels || !options.sources_for_manifest) return;
  for (ManifestModule& module : out.manifest.modules) {
    for (const std::string& file : module.files) {
      if (!IsOptimizedHlo(file) || file.find("..") != std::string::npos || file.starts_with("/")) continue;
      DeriveKernels(out, module, file, options, /*replace_kernels=*/false);
      break;
    }
  }
}

void ReadXlaDirectory(DumpDirectory& out, const DumpDirectoryOptions& options) {
  int64_t more = 0;
  std::string error;
  std::vector<Entry> entries = ListEntries(out.directory, options.max_entries, more, error);
  if (!error.empty()) out.problems.push_back(DisplayPath(out.directory) + ": cannot list the directory: " + error);
  if (more > 0) {
    out.problems.push_back(DisplayPath(out.directory) + ": holds more than " + std::to_string(options.max_entries) +
                           " entries; " + std::to_string(more) + " were not read");
  }

  std::vector<PendingFile> module_files;
  std::map<int64_t, std::map<std::pair<int, std::string>, std::vector<std::string>>> graphs;
  auto unplace = [&](std::string file, std::string reason) { out.unplaced.push_back({std::move(file), std::move(reason)}); };

  for (const Entry& entry : entries) {
    if (entry.type == fs::file_type::directory) {
      XlaDumpFileName name = ParseXlaDumpFileName(entry.name, /*is_directory=*/true);
      if (name.kind != XlaDumpFileKind::kModuleDirectory) {
        unplace(entry.name + "/", name.reason);
        continue;
      }
      module_files.push_back({entry.name + "/", name});
      int64_t inner_more = 0;
      std::string inner_error;
      for (const Entry& inner : ListEntries(out.directory + "/" + entry.name, options.max_entries, inner_more, inner_error)) {
        std::string file = entry.name + "/" + inner.name;
        if (inner.type == fs::file_type::regular) {
          module_files.push_back({file, name});
        } else {
          unplace(file, inner.type == fs::file_type::directory ? "a directory inside a module's directory; not read"
                                                                : TypeReason(inner.type));
        }
      }
      if (!inner_error.empty()) unplace(entry.name + "/", "cannot be listed: " + inner_error);
      if (inner_more > 0) unplace(entry.name + "/", std::to_string(inner_more) + " entries past the limit not read");
      continue;
    }
    if (entry.type != fs::file_type::regular) {
      unplace(entry.name, TypeReason(entry.type));
      continue;
    }
    if (IsTemporaryName(entry.name)) {
      unplace(entry.name, "an unfinished write (a writer's temporary)");
      continue;
    }
    XlaDumpFileName name = ParseXlaDumpFileName(entry.name);
    if (name.kind == XlaDumpFileKind::kUnknown) {
      unplace(entry.name, name.reason);
    } else if (name.kind == XlaDumpFileKind::kTensorFlowGraph) {
      graphs[name.graph_index][{ClusteringOrder(name.graph_stage), name.graph_stage}].push_back(entry.name);
      ++out.placed_files;
    } else {
      module_files.push_back({entry.name, std::move(name)});
    }
  }

  // The names each module id was dumped under, from the files that name it unambiguously.
  std::map<int64_t, std::vector<std::string>> names_of;
  for (const PendingFile& file : module_files) {
    if (!IsCanonicalKind(file.name.kind)) continue;
    std::vector<std::string>& names = names_of[file.name.module_id];
    if (std::find(names.begin(), names.end(), file.name.module_name) == names.end()) names.push_back(file.name.module_name);
  }
  // With --xla_dump_include_timestamp, runs that dumped into one directory are told apart by
  // their timestamps; files XLA writes without one (IR, debug_options) go with the latest run.
  std::map<std::pair<int64_t, std::string>, std::string> latest_stamp;
  auto later = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a > b;
  };
  for (const PendingFile& file : module_files) {
    std::string& latest = latest_stamp[{file.name.module_id, file.name.module_name}];
    if (later(file.name.timestamp, latest)) latest = file.name.timestamp;
  }
  std::map<std::tuple<int64_t, std::string, std::string>, PendingModule> modules;
  for (PendingFile& file : module_files) {
    XlaDumpFileName& name = file.name;
    std::vector<std::string>& names = names_of[name.module_id];
    if (names.empty()) names.push_back(name.module_name);
    // Find the module this file belongs to: its name, or (IR, PTX of a kernel) a name the file's
    // name starts with, the rest being the kernel's.
    const std::string* owner = nullptr;
    for (const std::string& candidate : names) {
      if (candidate == name.module_name) owner = &candidate;
    }
    if (owner == nullptr) {
      for (const std::string& candidate : names) {
        if (name.module_name.size() > candidate.size() + 1 && name.module_name.starts_with(candidate + ".")) {
          if (name.kernel.empty()) name.kernel = name.module_name.substr(candidate.size() + 1);
          owner = &candidate;
        }
      }
    }
    if (owner == nullptr && names.size() == 1) owner = &names.front();
    if (owner == nullptr) {
      unplace(file.file, "named for module " + std::to_string(name.module_id) +
                             ", which was dumped under several names, none of them this file's");
      continue;
    }
    std::string stamp = name.timestamp.empty() ? latest_stamp[{name.module_id, *owner}] : name.timestamp;
    PendingModule& module = modules[{name.module_id, *owner, stamp}];
    module.id = name.module_id;
    module.name = *owner;
    module.timestamp = std::move(stamp);
    module.files.push_back(std::move(file));
  }

  int64_t next_free_id = modules.empty() ? 0 : std::get<0>(modules.rbegin()->first) + 1;
  std::set<int64_t> used_ids;
  for (auto& [key, pending] : modules) {
    ManifestModule module;
    module.id = pending.id;
    module.name = pending.name;
    if (!used_ids.insert(module.id).second) {
      module.id = next_free_id++;
      out.problems.push_back(DisplayPath(out.directory) + ": module_" + std::to_string(pending.id) +
                             " was dumped more than once (several processes or runs); \"" + DisplayText(pending.name) +
                             "\"" + (pending.timestamp.empty() ? "" : " of " + pending.timestamp) +
                             " is shown as module " + std::to_string(module.id));
    }
    std::map<std::tuple<int64_t, std::string, std::string>, ManifestStage> stages;
    std::vector<std::pair<std::string, std::string>> kernel_files;  // kernel module, file
    std::string optimized;
    for (PendingFile& file : pending.files) {
      ++out.placed_files;
      const XlaDumpFileName& name = file.name;
      if (name.kind == XlaDumpFileKind::kModuleDirectory && file.file.ends_with("/")) {
        --out.placed_files;  // the directory itself is no file
        continue;
      }
      if (name.kind == XlaDumpFileKind::kPass) {
        ManifestStage& stage = stages[{name.step, name.pipeline, name.pass}];
        stage.step = name.step;
        stage.pipeline = name.pipeline;
        stage.pass = name.pass;
        // XLA dumps a pass that changed the module; the pipeline's own start and end always.
        stage.changed = name.pass != kPipelineStart && name.pass != kPipelineEnd;
        stage.files.push_back(file.file);
        continue;
      }
      if (name.kind == XlaDumpFileKind::kAfterOptimizations && optimized.empty() && IsOptimizedHlo(file.file)) {
        optimized = file.file;
      }
      if (!name.kernel.empty()) kernel_files.emplace_back(name.kernel, file.file);
      module.files.push_back(file.file);
    }
    for (auto& [order, stage] : stages) module.stages.push_back(std::move(stage));
    out.manifest.modules.push_back(std::move(module));
    ManifestModule& placed = out.manifest.modules.back();
    if (options.derive_kernels && !optimized.empty()) DeriveKernels(out, placed, optimized, options, true);
    for (const auto& [kernel_module, file] : kernel_files) {
      const std::string kernel = Underscored(KernelOfKernelModule(kernel_module));
      for (ManifestKernel& candidate : placed.kernels) {
        if (Underscored(candidate.name) == kernel) candidate.files.push_back(file);
      }
    }
  }

  for (auto& [index, stages] : graphs) {
    ManifestGraph graph;
    graph.id = index;
    graph.name = index == 0 ? "graph" : "graph " + std::to_string(index);
    for (auto& [order, files] : stages) graph.stages.push_back({order.second, std::move(files)});
    out.manifest.graphs.push_back(std::move(graph));
  }
}

}  // namespace

const DumpSourceLocation* DumpDirectory::KernelSource(int64_t module_id, const std::string& kernel) const {
  auto it = kernel_sources.find({module_id, kernel});
  return it == kernel_sources.end() ? nullptr : &it->second;
}

std::string DumpDirectory::KernelKind(int64_t module_id, const ManifestKernel& kernel) const {
  if (!kernel.fusion_kind.empty()) return kernel.fusion_kind;
  auto it = kernel_opcodes.find({module_id, kernel.name});
  if (it != kernel_opcodes.end()) return it->second;
  return kernel.fusion_computation.empty() ? "kernel" : "fusion";
}

std::string DumpDirectory::UnplacedSummary(size_t examples) const {
  if (unplaced.empty()) return "";
  std::string line = DisplayPath(directory) + ": " + std::to_string(unplaced.size()) +
                     (unplaced.size() == 1 ? " file" : " files") + " not placed: ";
  for (size_t i = 0; i < unplaced.size() && i < examples; ++i) {
    if (i > 0) line += "; ";
    line += DisplayText(unplaced[i].file) + " (" + unplaced[i].reason + ")";
  }
  if (unplaced.size() > examples) line += "; ...";
  return line;
}

DumpDirectory ReadDumpDirectory(const std::string& directory, const DumpDirectoryOptions& options) {
  DumpDirectory out;
  out.directory = directory;
  while (out.directory.size() > 1 && out.directory.back() == '/') out.directory.pop_back();
  std::string why;
  PathKind kind = GetPathKind(out.directory, &why);
  if (kind != PathKind::kDirectory) {
    out.problems.push_back(DisplayPath(out.directory) + ": " +
                           (kind == PathKind::kMissing ? std::string("no such directory")
                                                       : "not a directory" + (why.empty() ? "" : " (" + why + ")")));
    return out;
  }
  if (GetPathKind(out.directory + "/" + std::string(kManifestFileName)) != PathKind::kMissing) {
    out.source = DumpDirectory::Source::kManifest;
    ReadManifestDirectory(out, options);
  } else {
    out.source = DumpDirectory::Source::kXlaFileNames;
    ReadXlaDirectory(out, options);
    if (out.manifest.modules.empty() && out.manifest.graphs.empty()) {
      out.problems.push_back(DisplayPath(out.directory) + ": no " + std::string(kManifestFileName) +
                             " and no file XLA or TensorFlow dumps (module_NNNN.*, *.pbtxt)");
    }
  }
  return out;
}

}  // namespace xlens
