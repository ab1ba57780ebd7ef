// `xlens inspect DIR [--trace FILE] [--json FILE]`: the model of a dump directory as the viewer
// shows it (dump_directory.h), for scripts and CI: modules, their stages in pipeline order, their
// kernels with op_name and the source line they came from, the files that could not be placed,
// and with --trace, how many of the trace's kernel events link to a kernel of the dump.
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_directory.h"
#include "dump/xla_dump_kernels.h"
#include "profiler/chrome_trace_reader.h"

namespace xlens::cli {
namespace {

struct KernelTime {
  int64_t events = 0;
  int64_t total_ns = 0;
};

// Counts a trace's events and links kernel events to the dump's kernels by name: an event's
// hlo_op argument when it has one (XLA's and jax.profiler's), else its name; its hlo_module
// argument, when present, picks the module.
class LinkingVisitor : public profiler::ChromeTraceVisitor {
 public:
  explicit LinkingVisitor(const DumpDirectory& dump) {
    for (const ManifestModule& module : dump.manifest.modules) {
      for (const ManifestKernel& kernel : module.kernels) {
        // Several modules may hold a kernel of the same name (recompilations): the last wins,
        // as the viewer's FindModuleByName does.
        by_name_[kernel.name] = {module.id, kernel.name};
        by_module_[{module.name, kernel.name}] = {module.id, kernel.name};
        if (!kernel.hlo_instruction.empty()) by_name_.emplace(kernel.hlo_instruction, std::make_pair(module.id, kernel.name));
      }
    }
  }
  bool WantsFlows() const override { return false; }
  void OnEvent(profiler::TraceEvent& event) override {
    ++events;
    std::string op = event.name;
    std::string module;
    if (const profiler::TraceArg* arg = profiler::FindArg(event, "hlo_op")) {
      if (auto* text = std::get_if<std::string>(&arg->value)) op = *text;
    }
    if (const profiler::TraceArg* arg = profiler::FindArg(event, "hlo_module")) {
      if (auto* text = std::get_if<std::string>(&arg->value)) module = *text;
    }
    const std::pair<int64_t, std::string>* kernel = nullptr;
    if (!module.empty()) {
      auto it = by_module_.find({module, op});
      if (it != by_module_.end()) kernel = &it->second;
    }
    if (kernel == nullptr) {
      auto it = by_name_.find(op);
      if (it != by_name_.end()) kernel = &it->second;
    }
    bool is_kernel = profiler::IsKernelCategory(event.category) || !module.empty() ||
                     profiler::FindArg(event, "hlo_op") != nullptr || kernel != nullptr;
    if (!is_kernel) return;
    ++kernel_events;
    if (kernel == nullptr) return;
    ++linked_events;
    KernelTime& time = times[*kernel];
    ++time.events;
    time.total_ns += event.duration_ns;
  }

  int64_t events = 0, kernel_events = 0, linked_events = 0;
  std::map<std::pair<int64_t, std::string>, KernelTime> times;

 private:
  std::map<std::string, std::pair<int64_t, std::string>> by_name_;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::string>> by_module_;
};

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

nlohmann::json ToJson(const DumpDirectory& dump, const LinkingVisitor* trace, const std::string& trace_path) {
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
                             {"file", DumpHloFile(stage)}, {"files", stage.files}});
    }
    m["kernels"] = nlohmann::json::array();
    for (const ManifestKernel& kernel : module.kernels) {
      nlohmann::json k;
      k["name"] = kernel.name;
      k["kind"] = dump.KernelKind(module.id, kernel);
      k["hlo_instruction"] = kernel.hlo_instruction;
      k["op_name"] = kernel.op_names.empty() ? "" : kernel.op_names.front();
      k["op_names"] = kernel.op_names;
      k["files"] = kernel.files;
      if (const DumpSourceLocation* source = dump.KernelSource(module.id, kernel.name)) {
        k["source"] = {{"file", source->file}, {"line", source->line}, {"function", source->function}};
        if (!source->via.empty()) k["source"]["via"] = source->via;
      } else {
        k["source"] = nullptr;
      }
      KernelTime time;
      if (trace != nullptr) {
        auto it = trace->times.find({module.id, kernel.name});
        if (it != trace->times.end()) time = it->second;
      }
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
    root["trace"] = {{"file", trace_path}, {"events", trace->events}, {"kernel_events", trace->kernel_events},
                     {"linked_events", trace->linked_events}};
  }
  return root;
}

std::string Text(const DumpDirectory& dump, const LinkingVisitor* trace, const std::string& trace_path) {
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
      if (trace != nullptr) {
        auto it = trace->times.find({module.id, kernel.name});
        if (it != trace->times.end()) {
          out += fmt::format("  {} events, {:.3f} us", it->second.events,
                             static_cast<double>(it->second.total_ns) / 1000.0);
        }
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
    out += "trace " + DisplayPath(trace_path) + ": " + std::to_string(trace->events) + " events, " +
           std::to_string(trace->kernel_events) + " kernel events, " + std::to_string(trace->linked_events) +
           " linked to a kernel of the dump\n";
  }
  return out;
}

}  // namespace

int RunInspect(const InspectArgs& args) {
  DumpDirectoryOptions options;
  options.derive_kernels = DeriveKernelsFromHlo;
  DumpDirectory dump = ReadDumpDirectory(args.directory, options);
  if (dump.source == DumpDirectory::Source::kNone) {
    return Fail(Error("inspect: " + (dump.problems.empty() ? DisplayPath(args.directory) : dump.problems.front())));
  }
  std::optional<LinkingVisitor> trace;
  if (!args.trace.empty()) {
    trace.emplace(dump);
    StatusOr<profiler::ChromeTraceHeader> header = profiler::StreamChromeTrace(args.trace, *trace);
    if (!header.ok()) return Fail(header.status());
  }
  const LinkingVisitor* linked = trace ? &*trace : nullptr;
  if (!args.json.empty()) {
    std::string text = ToJson(dump, linked, args.trace).dump(1) + "\n";
    Status written = args.json == "-" ? Status() : WriteFile(args.json, text);
    if (args.json == "-" && (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)) {
      return Fail(Error("cannot write the JSON to standard output"));
    }
    if (!written.ok()) return Fail(written);
    if (args.json == "-") return 0;
  }
  std::string text = Text(dump, linked, args.trace);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Fail(Error("cannot write to standard output"));
  }
  return 0;
}

}  // namespace xlens::cli
