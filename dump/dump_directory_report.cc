#include "dump/dump_directory_report.h"

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"
#include "dump/xla_dump_kernels.h"

namespace xlens {
namespace {

// The stage's HLO text, the file a script opens to see the module after the pass.
std::string DumpHloFile(const ManifestStage& stage) {
  for (const std::string& file : stage.files) {
    if (file.ends_with(".txt")) return file;
  }
  return stage.files.empty() ? "" : stage.files.front();
}

const char* SourceName(DumpDirectory::Source source) {
  switch (source) {
    case DumpDirectory::Source::kManifest: return "manifest";
    case DumpDirectory::Source::kXlaFileNames: return "xla_file_names";
    default: return "none";
  }
}

const DumpTraceLinks::KernelTime* FindTime(const DumpTraceLinks* trace, int64_t module, const std::string& kernel) {
  if (trace == nullptr) return nullptr;
  auto it = trace->times.find({module, kernel});
  return it == trace->times.end() ? nullptr : &it->second;
}

}  // namespace

StatusOr<DumpDirectory> ReadDumpDirectoryForInspect(const std::string& directory) {
  DumpDirectoryOptions options;
  options.derive_kernels = DeriveKernelsFromHlo;
  DumpDirectory dump = ReadDumpDirectory(directory, options);
  if (dump.source == DumpDirectory::Source::kNone) {
    return Error("inspect: " + (dump.problems.empty() ? DisplayPath(directory) : dump.problems.front()));
  }
  return dump;
}

nlohmann::json DumpDirectoryJson(const DumpDirectory& dump, const DumpTraceLinks* trace) {
  nlohmann::json root;
  root["directory"] = dump.directory;
  root["source"] = SourceName(dump.source);
  root["modules"] = nlohmann::json::array();
  for (const ManifestModule& module : dump.manifest.modules) {
    nlohmann::json m;
    m["id"] = module.id;
    m["name"] = module.name;
    m["files"] = module.files;
    m["stages"] = nlohmann::json::array();
    for (const ManifestStage& stage : module.stages) {
      m["stages"].push_back({{"step", stage.step}, {"pipeline", stage.pipeline}, {"pass", stage.pass},
                             {"changed", stage.changed}, {"wall_ns", stage.wall_ns},
                             {"file", DumpHloFile(stage)}, {"files", stage.files}});
    }
    m["kernels"] = nlohmann::json::array();
    for (const ManifestKernel& kernel : module.kernels) {
      nlohmann::json k;
      k["name"] = kernel.name;
      k["kind"] = dump.KernelKind(module.id, kernel);
      k["hlo_instruction"] = kernel.hlo_instruction;
      k["fusion_kind"] = kernel.fusion_kind;
      k["fusion_computation"] = kernel.fusion_computation;
      k["created_by_pass"] = kernel.created_by_pass;
      k["launch"] = kernel.launch;
      k["op_name"] = kernel.op_names.empty() ? "" : kernel.op_names.front();
      k["op_names"] = kernel.op_names;
      k["files"] = kernel.files;
      if (const DumpSourceLocation* source = dump.KernelSource(module.id, kernel.name)) {
        k["source"] = {{"file", source->file}, {"line", source->line}, {"function", source->function}};
        if (!source->via.empty()) k["source"]["via"] = source->via;
      } else {
        k["source"] = nullptr;
      }
      DumpTraceLinks::KernelTime time;
      if (const DumpTraceLinks::KernelTime* found = FindTime(trace, module.id, kernel.name)) time = *found;
      k["trace"] = {{"events", time.events}, {"total_us", static_cast<double>(time.total_ns) / 1000.0}};
      m["kernels"].push_back(std::move(k));
    }
    root["modules"].push_back(std::move(m));
  }
  root["graphs"] = nlohmann::json::array();
  for (const ManifestGraph& graph : dump.manifest.graphs) {
    nlohmann::json g{{"id", graph.id}, {"name", graph.name}, {"stages", nlohmann::json::array()}};
    for (const ManifestGraphStage& stage : graph.stages) g["stages"].push_back({{"name", stage.name}, {"files", stage.files}});
    root["graphs"].push_back(std::move(g));
  }
  root["placed_files"] = dump.placed_files;
  root["unplaced"] = nlohmann::json::array();
  for (const UnplacedDumpFile& file : dump.unplaced) root["unplaced"].push_back({{"file", file.file}, {"reason", file.reason}});
  root["problems"] = dump.problems;
  if (trace != nullptr) {
    root["trace"] = {{"file", trace->file}, {"events", trace->events}, {"kernel_events", trace->kernel_events},
                     {"linked_events", trace->linked_events}};
  }
  return root;
}

std::string DumpDirectoryText(const DumpDirectory& dump, const DumpTraceLinks* trace) {
  std::string out = DisplayPath(dump.directory) + ": " +
                    (dump.source == DumpDirectory::Source::kManifest ? "an xlens dump (manifest.json)"
                                                                     : "an XLA dump (read from its file names)") +
                    ", " + std::to_string(dump.manifest.modules.size()) + " modules\n";
  for (const ManifestModule& module : dump.manifest.modules) {
    out += "module " + std::to_string(module.id) + " " + DisplayText(module.name, 200) + ": " +
           std::to_string(module.stages.size()) + " stages, " + std::to_string(module.kernels.size()) + " kernels, " +
           std::to_string(module.files.size()) + " other files\n";
    // A pass dump per pass of a long pipeline makes thousands of stages: the first are shown,
    // the JSON has all.
    constexpr size_t kMaxStagesShown = 200;
    for (size_t i = 0; i < module.stages.size() && i < kMaxStagesShown; ++i) {
      const ManifestStage& stage = module.stages[i];
      out += "  stage " + std::to_string(stage.step) + "  " + DisplayText(stage.pipeline) + " / " +
             DisplayText(stage.pass) + "\n";
    }
    if (module.stages.size() > kMaxStagesShown) {
      out += "  ... " + std::to_string(module.stages.size() - kMaxStagesShown) + " more stages (--json lists all)\n";
    }
    for (const ManifestKernel& kernel : module.kernels) {
      out += "  kernel " + DisplayText(kernel.name) + " (" + dump.KernelKind(module.id, kernel) + ")";
      if (!kernel.op_names.empty()) out += "  " + DisplayText(kernel.op_names.front(), 200);
      if (const DumpSourceLocation* source = dump.KernelSource(module.id, kernel.name)) {
        out += "  " + DisplayText(source->file, 200) + ":" + std::to_string(source->line);
        if (!source->function.empty()) out += " (" + DisplayText(source->function) + ")";
        if (!source->via.empty()) out += " [via " + DisplayText(source->via) + "]";
      }
      if (const DumpTraceLinks::KernelTime* time = FindTime(trace, module.id, kernel.name)) {
        out += fmt::format("  {} events, {:.3f} us", time->events, static_cast<double>(time->total_ns) / 1000.0);
      }
      out += "\n";
    }
  }
  for (const ManifestGraph& graph : dump.manifest.graphs) {
    out += "TensorFlow " + DisplayText(graph.name) + ": " + std::to_string(graph.stages.size()) + " clustering stages\n";
    for (const ManifestGraphStage& stage : graph.stages) out += "  stage " + DisplayText(stage.name) + "\n";
  }
  if (dump.source == DumpDirectory::Source::kXlaFileNames) {
    out += std::to_string(dump.placed_files) + " files placed, " + std::to_string(dump.unplaced.size()) + " not\n";
  }
  constexpr size_t kMaxUnplacedShown = 50;
  for (size_t i = 0; i < dump.unplaced.size() && i < kMaxUnplacedShown; ++i) {
    out += "not placed: " + DisplayText(dump.unplaced[i].file, 200) + " (" + dump.unplaced[i].reason + ")\n";
  }
  if (dump.unplaced.size() > kMaxUnplacedShown) {
    out += "... " + std::to_string(dump.unplaced.size() - kMaxUnplacedShown) + " more not placed (--json lists all)\n";
  }
  for (const std::string& problem : dump.problems) out += "problem: " + problem + "\n";
  if (trace != nullptr) {
    out += "trace " + DisplayPath(trace->file) + ": " + std::to_string(trace->events) + " events, " +
           std::to_string(trace->kernel_events) + " kernel events, " + std::to_string(trace->linked_events) +
           " linked to a kernel of the dump\n";
  }
  return out;
}

}  // namespace xlens
