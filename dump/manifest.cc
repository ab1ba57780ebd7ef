#include "dump/manifest.h"

#include <algorithm>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <limits>
#include <optional>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

using Json = nlohmann::ordered_json;

Json StringList(const std::vector<std::string>& items) {
  Json out = Json::array();
  for (const std::string& item : items) out.push_back(item);
  return out;
}

Json ChangesToJson(const ManifestStageChanges& changes) {
  Json fused_into = Json::object();
  for (const auto& [instruction, fusion] : changes.fused_into) fused_into[instruction] = fusion;
  return Json{{"added", StringList(changes.added)},
              {"removed", StringList(changes.removed)},
              {"modified", StringList(changes.modified)},
              {"fused_into", std::move(fused_into)}};
}

Json FrameToJson(const ManifestSourceFrame& frame) {
  return Json{{"file", frame.file}, {"line", frame.line}, {"column", frame.column}, {"function", frame.function}};
}

Json ModuleToJson(const ManifestModule& module) {
  Json stages = Json::array();
  for (const ManifestStage& s : module.stages) {
    Json stage{{"step", s.step},         {"pipeline", s.pipeline}, {"pass", s.pass},
               {"changed", s.changed},   {"wall_ns", s.wall_ns},   {"files", StringList(s.files)}};
    if (!s.changes.empty()) stage["changes"] = ChangesToJson(s.changes);
    stages.push_back(std::move(stage));
  }
  Json kernels = Json::array();
  for (const ManifestKernel& k : module.kernels) {
    Json stack = Json::array();
    for (const ManifestSourceFrame& frame : k.stack) stack.push_back(FrameToJson(frame));
    kernels.push_back(Json{{"name", k.name},
                           {"fusion_kind", k.fusion_kind},
                           {"hlo_instruction", k.hlo_instruction},
                           {"fusion_computation", k.fusion_computation},
                           {"op_names", StringList(k.op_names)},
                           {"created_by_pass", k.created_by_pass},
                           {"launch", k.launch},
                           {"files", StringList(k.files)},
                           {"source", k.source ? FrameToJson(*k.source) : Json(nullptr)},
                           {"stack", std::move(stack)}});
  }
  Json out{{"id", module.id},
           {"name", module.name},
           {"files", StringList(module.files)},
           {"stages", std::move(stages)},
           {"kernels", std::move(kernels)}};
  if (module.process != 0) out["process"] = module.process;
  if (!module.fusion_decisions.empty()) {
    Json decisions = Json::array();
    for (const ManifestFusionDecision& d : module.fusion_decisions) {
      decisions.push_back(Json{{"step", d.step},
                               {"pass", d.pass},
                               {"producer", d.producer},
                               {"consumer", d.consumer},
                               {"fused", d.fused},
                               {"kind", d.kind},
                               {"fusion", d.fusion},
                               {"reason", d.reason}});
    }
    out["fusion_decisions"] = std::move(decisions);
  }
  if (!module.invocation.empty()) {
    const ManifestInvocation& i = module.invocation;
    out["invocation"] = Json{{"command_line", StringList(i.command_line)},
                             {"backend", i.backend},
                             {"xla_flags", i.xla_flags},
                             {"tf_xla_flags", i.tf_xla_flags}};
  }
  if (!module.executions.empty()) {
    auto tensors = [](const std::vector<ManifestTensor>& list) {
      Json out = Json::array();
      for (const ManifestTensor& t : list) {
        out.push_back(Json{{"file", t.file}, {"shape", t.shape}, {"checksum", t.checksum},
                           {"bytes", t.bytes}});
      }
      return out;
    };
    Json executions = Json::array();
    for (const ManifestExecution& e : module.executions) {
      executions.push_back(Json{{"execution", e.execution},
                                {"arguments", tensors(e.arguments)},
                                {"results", tensors(e.results)}});
    }
    out["executions"] = std::move(executions);
  }
  return out;
}

Json GraphToJson(const ManifestGraph& graph) {
  Json stages = Json::array();
  for (const ManifestGraphStage& s : graph.stages) {
    stages.push_back(Json{{"name", s.name}, {"files", StringList(s.files)}});
  }
  Json clusters = Json::array();
  for (const ManifestCluster& c : graph.clusters) {
    clusters.push_back(Json{{"name", c.name},
                            {"nodes", StringList(c.nodes)},
                            {"declustered", StringList(c.declustered)},
                            {"modules", StringList(c.modules)}});
  }
  Json unclustered = Json::object(), declustered = Json::object();
  for (const auto& [node, reason] : graph.unclustered) unclustered[node] = reason;
  for (const auto& [node, reason] : graph.declustered) declustered[node] = reason;
  return Json{{"process", graph.process},       {"id", graph.id},
              {"name", graph.name},             {"stages", std::move(stages)},
              {"clusters", std::move(clusters)}, {"unclustered", std::move(unclustered)},
              {"declustered", std::move(declustered)}};
}

const char* TypeName(const Json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

// Reads typed fields of one JSON object, naming the object's path in errors.
class Fields {
 public:
  Fields(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  Status Check() const {
    if (object_.is_object()) return OkStatus();
    return Error(fmt::format("{}: expected an object, got {}", Where(), TypeName(object_)));
  }

  Status Int(const char* key, bool required, int64_t& out) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, required, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_number_integer()) return Wrong(key, "an integer", *v);
    // An unsigned integer past int64's range would wrap to a negative id.
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(fmt::format("{}{}{}: {} is out of range", path_, path_.empty() ? "" : ".", key,
                               v->get<uint64_t>()));
    }
    out = v->get<int64_t>();
    return OkStatus();
  }
  Status Bool(const char* key, bool required, bool& out) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, required, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_boolean()) return Wrong(key, "a boolean", *v);
    out = v->get<bool>();
    return OkStatus();
  }
  Status String(const char* key, bool required, std::string& out) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, required, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_string()) return Wrong(key, "a string", *v);
    out = v->get<std::string>();
    return OkStatus();
  }
  Status Strings(const char* key, std::vector<std::string>& out) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, false, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_array()) return Wrong(key, "an array of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& item = (*v)[i];
      if (!item.is_string()) {
        return Error(
            fmt::format("{}.{}[{}]: expected a string, got {}", Where(), key, i, TypeName(item)));
      }
      out.push_back(item.get<std::string>());
    }
    return OkStatus();
  }
  // An object of strings (node -> reason).
  Status StringMap(const char* key, std::map<std::string, std::string>& out) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, false, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_object()) return Wrong(key, "an object of strings", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_string()) {
        return Error(fmt::format("{}.{}[\"{}\"]: expected a string, got {}", Where(), key,
                                 EscapeForTerminal(TruncateUtf8(it.key(), 200)),
                                 TypeName(it.value())));
      }
      out[it.key()] = it.value().get<std::string>();
    }
    return OkStatus();
  }
  // Whether `key` is there and null.
  bool IsNull(const char* key) const {
    auto it = object_.find(key);
    return it != object_.end() && it->is_null();
  }
  // An object, read by `read(fields_of_it)`; nothing when absent.
  template <typename ReadObject>
  Status Object(const char* key, ReadObject read) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, false, v));
    if (v == nullptr) return OkStatus();
    Fields object(*v, fmt::format("{}{}{}", path_, path_.empty() ? "" : ".", key));
    RETURN_IF_ERROR(object.Check());
    return read(object);
  }
  // An array of objects, each read by `read(fields_of_item, index)`.
  template <typename ReadItem>
  Status Objects(const char* key, bool required, ReadItem read) const {
    const Json* v = nullptr;
    RETURN_IF_ERROR(Find(key, required, v));
    if (v == nullptr) return OkStatus();
    if (!v->is_array()) return Wrong(key, "an array", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      Fields item((*v)[i], fmt::format("{}{}{}[{}]", path_, path_.empty() ? "" : ".", key, i));
      RETURN_IF_ERROR(item.Check());
      RETURN_IF_ERROR(read(item));
    }
    return OkStatus();
  }

 private:
  std::string Where() const { return path_.empty() ? "top level" : path_; }
  Status Find(const char* key, bool required, const Json*& out) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      if (required) return Error(fmt::format("{}: missing \"{}\"", Where(), key));
      return OkStatus();
    }
    out = &*it;
    return OkStatus();
  }
  Status Wrong(const char* key, const char* expected, const Json& got) const {
    return Error(fmt::format("{}{}{}: expected {}, got {}", path_, path_.empty() ? "" : ".", key,
                             expected, TypeName(got)));
  }

  const Json& object_;
  std::string path_;
};

Status ReadStage(const Fields& f, ManifestStage& s) {
  RETURN_IF_ERROR(f.Int("step", true, s.step));
  RETURN_IF_ERROR(f.String("pipeline", true, s.pipeline));
  RETURN_IF_ERROR(f.String("pass", true, s.pass));
  RETURN_IF_ERROR(f.Bool("changed", true, s.changed));
  RETURN_IF_ERROR(f.Int("wall_ns", false, s.wall_ns));
  RETURN_IF_ERROR(f.Strings("files", s.files));
  return f.Object("changes", [&](const Fields& c) {
    RETURN_IF_ERROR(c.Strings("added", s.changes.added));
    RETURN_IF_ERROR(c.Strings("removed", s.changes.removed));
    RETURN_IF_ERROR(c.Strings("modified", s.changes.modified));
    return c.StringMap("fused_into", s.changes.fused_into);
  });
}

Status ReadFusionDecision(const Fields& f, ManifestFusionDecision& d) {
  RETURN_IF_ERROR(f.Int("step", true, d.step));
  RETURN_IF_ERROR(f.String("pass", true, d.pass));
  RETURN_IF_ERROR(f.String("producer", true, d.producer));
  RETURN_IF_ERROR(f.String("consumer", true, d.consumer));
  RETURN_IF_ERROR(f.Bool("fused", true, d.fused));
  RETURN_IF_ERROR(f.String("kind", false, d.kind));
  RETURN_IF_ERROR(f.String("fusion", false, d.fusion));
  return f.String("reason", false, d.reason);
}

Status ReadSourceFrame(const Fields& f, ManifestSourceFrame& frame) {
  RETURN_IF_ERROR(f.String("file", true, frame.file));
  RETURN_IF_ERROR(f.Int("line", false, frame.line));
  RETURN_IF_ERROR(f.Int("column", false, frame.column));
  return f.String("function", false, frame.function);
}

Status ReadKernel(const Fields& f, ManifestKernel& k) {
  RETURN_IF_ERROR(f.String("name", true, k.name));
  RETURN_IF_ERROR(f.String("fusion_kind", false, k.fusion_kind));
  RETURN_IF_ERROR(f.String("hlo_instruction", false, k.hlo_instruction));
  RETURN_IF_ERROR(f.String("fusion_computation", false, k.fusion_computation));
  RETURN_IF_ERROR(f.Strings("op_names", k.op_names));
  RETURN_IF_ERROR(f.String("created_by_pass", false, k.created_by_pass));
  RETURN_IF_ERROR(f.String("launch", false, k.launch));
  RETURN_IF_ERROR(f.Strings("files", k.files));
  if (!f.IsNull("source")) {
    RETURN_IF_ERROR(f.Object("source", [&](const Fields& source) {
      return ReadSourceFrame(source, k.source.emplace());
    }));
  }
  return f.Objects("stack", false, [&](const Fields& item) {
    return ReadSourceFrame(item, k.stack.emplace_back());
  });
}

Status ReadModule(const Fields& f, ManifestModule& m) {
  RETURN_IF_ERROR(f.Int("id", true, m.id));
  RETURN_IF_ERROR(f.String("name", true, m.name));
  RETURN_IF_ERROR(f.Int("process", false, m.process));
  RETURN_IF_ERROR(f.Strings("files", m.files));
  RETURN_IF_ERROR(f.Objects("stages", false, [&](const Fields& item) {
    return ReadStage(item, m.stages.emplace_back());
  }));
  RETURN_IF_ERROR(f.Objects("kernels", false, [&](const Fields& item) {
    return ReadKernel(item, m.kernels.emplace_back());
  }));
  RETURN_IF_ERROR(f.Objects("fusion_decisions", false, [&](const Fields& item) {
    return ReadFusionDecision(item, m.fusion_decisions.emplace_back());
  }));
  RETURN_IF_ERROR(f.Object("invocation", [&](const Fields& i) {
    RETURN_IF_ERROR(i.Strings("command_line", m.invocation.command_line));
    RETURN_IF_ERROR(i.String("backend", false, m.invocation.backend));
    RETURN_IF_ERROR(i.String("xla_flags", false, m.invocation.xla_flags));
    return i.String("tf_xla_flags", false, m.invocation.tf_xla_flags);
  }));
  return f.Objects("executions", false, [&](const Fields& item) {
    ManifestExecution& e = m.executions.emplace_back();
    RETURN_IF_ERROR(item.Int("execution", true, e.execution));
    auto tensors = [](std::vector<ManifestTensor>& list) {
      return [&list](const Fields& t) {
        ManifestTensor& tensor = list.emplace_back();
        RETURN_IF_ERROR(t.String("file", true, tensor.file));
        RETURN_IF_ERROR(t.String("shape", false, tensor.shape));
        RETURN_IF_ERROR(t.String("checksum", false, tensor.checksum));
        return t.Int("bytes", false, tensor.bytes);
      };
    };
    RETURN_IF_ERROR(item.Objects("arguments", false, tensors(e.arguments)));
    return item.Objects("results", false, tensors(e.results));
  });
}

Status ReadGraph(const Fields& f, ManifestGraph& g) {
  RETURN_IF_ERROR(f.Int("process", false, g.process));
  RETURN_IF_ERROR(f.Int("id", true, g.id));
  RETURN_IF_ERROR(f.String("name", false, g.name));
  RETURN_IF_ERROR(f.Objects("stages", false, [&](const Fields& item) {
    ManifestGraphStage& s = g.stages.emplace_back();
    RETURN_IF_ERROR(item.String("name", true, s.name));
    return item.Strings("files", s.files);
  }));
  RETURN_IF_ERROR(f.Objects("clusters", false, [&](const Fields& item) {
    ManifestCluster& c = g.clusters.emplace_back();
    RETURN_IF_ERROR(item.String("name", true, c.name));
    RETURN_IF_ERROR(item.Strings("nodes", c.nodes));
    RETURN_IF_ERROR(item.Strings("declustered", c.declustered));
    return item.Strings("modules", c.modules);
  }));
  RETURN_IF_ERROR(f.StringMap("unclustered", g.unclustered));
  return f.StringMap("declustered", g.declustered);
}

// The manifest a parsed document describes; errors name the field.
StatusOr<Manifest> ManifestFromJson(const Json& root) {
  Manifest manifest;
  Fields top(root, "");
  RETURN_IF_ERROR(top.Check());
  int64_t format = 0;
  RETURN_IF_ERROR(top.Int("format", true, format));
  if (format < 1) return Error(fmt::format("format: {} is not a manifest format", format));
  if (format > kManifestFormat) {
    return Error(fmt::format("format {} is newer than this reader understands (up to {})", format,
                             kManifestFormat));
  }
  manifest.format = static_cast<int>(format);
  RETURN_IF_ERROR(top.Objects("modules", true, [&](const Fields& item) {
    return ReadModule(item, manifest.modules.emplace_back());
  }));
  RETURN_IF_ERROR(top.Objects("graphs", false, [&](const Fields& item) {
    return ReadGraph(item, manifest.graphs.emplace_back());
  }));
  return manifest;
}

// nlohmann's parse errors read "[json.exception.parse_error.101] parse error at line 1, ...";
// the bracketed id means nothing to a user.
std::string CleanJsonError(const char* what) {
  std::string message = what;
  if (message.starts_with("[json.exception.")) {
    size_t close = message.find("] ");
    if (close != std::string::npos) message = message.substr(close + 2);
  }
  return message;
}

// Holds an exclusive flock on a directory for its lifetime. Failing to lock (a file system
// without flock) only loses protection against concurrent writers, so it is not an error.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory) {
    fd_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

const ManifestModule* Manifest::FindModule(int64_t id) const {
  for (const ManifestModule& module : modules) {
    if (module.id == id) return &module;
  }
  return nullptr;
}

std::string ManifestToJson(const Manifest& manifest) {
  Json modules = Json::array();
  for (const ManifestModule& module : manifest.modules) modules.push_back(ModuleToJson(module));
  Json root{{"format", manifest.format}, {"modules", std::move(modules)}};
  if (!manifest.graphs.empty()) {
    Json graphs = Json::array();
    for (const ManifestGraph& graph : manifest.graphs) graphs.push_back(GraphToJson(graph));
    root["graphs"] = std::move(graphs);
  }
  // Names and op_names come from user files and may hold bytes that are not UTF-8; dump() would
  // throw on them.
  return root.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

StatusOr<Manifest> ParseManifest(std::string_view text) {
  // Every nlohmann exception stops here: parse errors, but also out_of_range for a number past a
  // double's range (1e400) and whatever a later version adds. A manifest is read while a user's
  // compilation runs, and that must never end because of it.
  try {
    Json root = Json::parse(text.begin(), text.end());
    return ManifestFromJson(root);
  } catch (const Json::exception& e) {
    return Error(fmt::format("not valid JSON: {}", CleanJsonError(e.what())));
  } catch (const std::bad_alloc&) {
    return Error(fmt::format("not readable: out of memory parsing {} of JSON", FormatBytes(text.size())));
  }
}

StatusOr<Manifest> ReadManifest(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  StatusOr<Manifest> manifest = ParseManifest(text);
  if (!manifest.ok()) return manifest.status().WithContext(path);
  return manifest;
}

ManifestWriter::ManifestWriter(std::string directory)
    : directory_(std::move(directory)),
      path_((std::filesystem::path(directory_) / kManifestFileName).string()) {}

ManifestModule& ManifestWriter::ModuleWithId(int64_t id) {
  for (ManifestModule& module : manifest_.modules) {
    if (module.id == id) return module;
  }
  ManifestModule& module = manifest_.modules.emplace_back();
  module.id = id;
  return module;
}

ManifestModule& ManifestWriter::AddModule(int64_t id, std::string name) {
  ManifestModule& module = ModuleWithId(id);
  module.name = std::move(name);
  return module;
}

void ManifestWriter::AddModuleFile(int64_t module_id, std::string file) {
  ModuleWithId(module_id).files.push_back(std::move(file));
}

void ManifestWriter::AddStage(int64_t module_id, ManifestStage stage) {
  ModuleWithId(module_id).stages.push_back(std::move(stage));
}

void ManifestWriter::AddKernel(int64_t module_id, ManifestKernel kernel) {
  // The pass pipeline records a kernel when fusion makes it, code generation again when it is
  // emitted: one entry, the later record's non-empty fields winning and files accumulating.
  for (ManifestKernel& k : ModuleWithId(module_id).kernels) {
    if (kernel.hlo_instruction.empty() || k.hlo_instruction != kernel.hlo_instruction) continue;
    if (!kernel.name.empty()) k.name = kernel.name;
    if (!kernel.fusion_kind.empty()) k.fusion_kind = kernel.fusion_kind;
    if (!kernel.fusion_computation.empty()) k.fusion_computation = kernel.fusion_computation;
    if (!kernel.op_names.empty()) k.op_names = kernel.op_names;
    if (!kernel.created_by_pass.empty()) k.created_by_pass = kernel.created_by_pass;
    if (!kernel.launch.empty()) k.launch = kernel.launch;
    if (kernel.source) {
      k.source = std::move(kernel.source);
      k.stack = std::move(kernel.stack);
    }
    for (std::string& f : kernel.files) {
      if (std::find(k.files.begin(), k.files.end(), f) == k.files.end()) k.files.push_back(f);
    }
    return;
  }
  ModuleWithId(module_id).kernels.push_back(std::move(kernel));
}

void ManifestWriter::SetInvocation(int64_t module_id, ManifestInvocation invocation) {
  ModuleWithId(module_id).invocation = std::move(invocation);
}

void ManifestWriter::AddExecution(int64_t module_id, ManifestExecution execution) {
  ModuleWithId(module_id).executions.push_back(std::move(execution));
}

void ManifestWriter::AddFusionDecision(int64_t module_id, ManifestFusionDecision decision) {
  ModuleWithId(module_id).fusion_decisions.push_back(std::move(decision));
}

void ManifestWriter::AddGraph(ManifestGraph graph) {
  for (ManifestGraph& g : manifest_.graphs) {
    if (g.process == graph.process && g.id == graph.id) {
      g = std::move(graph);
      return;
    }
  }
  manifest_.graphs.push_back(std::move(graph));
}

bool ManifestWriter::AddClusterModule(const std::string& cluster, const std::string& module) {
  for (auto g = manifest_.graphs.rbegin(); g != manifest_.graphs.rend(); ++g) {
    for (ManifestCluster& c : g->clusters) {
      if (c.name != cluster) continue;
      if (std::find(c.modules.begin(), c.modules.end(), module) == c.modules.end()) {
        c.modules.push_back(module);
      }
      return true;
    }
  }
  return false;
}

Status ManifestWriter::Write() {
  DirectoryLock lock(directory_);
  ASSIGN_OR_RETURN(Manifest on_disk, ReadLocked());
  return WriteLocked(std::move(on_disk));
}

ManifestWriter::Claim ManifestWriter::ClaimModule(
    std::string name, int64_t at_least, int64_t max_modules,
    const std::function<std::set<int64_t>()>& ids_in_use) {
  DirectoryLock lock(directory_);
  Claim claim;
  std::set<int64_t> present = ids_in_use();
  StatusOr<Manifest> on_disk = ReadLocked();
  if (on_disk.ok()) {
    for (const ManifestModule& module : on_disk->modules) present.insert(module.id);
  }
  for (const ManifestModule& module : manifest_.modules) present.insert(module.id);
  claim.id = std::max<int64_t>(at_least, present.empty() ? 1 : *present.rbegin() + 1);
  claim.modules_present = static_cast<int64_t>(present.size());
  if (max_modules >= 0 && claim.modules_present >= max_modules) return claim;
  AddModule(claim.id, std::move(name)).process = ::getpid();
  claim.recorded = true;
  if (!on_disk.ok()) {
    claim.problem = on_disk.status().message();
    return claim;
  }
  // Written now, still under the lock: the next process to claim sees this id taken.
  if (Status written = WriteLocked(std::move(*on_disk)); !written.ok()) {
    claim.problem = written.message();
  }
  return claim;
}

std::vector<std::string> ManifestWriter::ListFilesOfEndedWriters(
    const std::function<int64_t(std::string_view)>& module_id_of) {
  DirectoryLock lock(directory_);
  StatusOr<Manifest> on_disk = ReadLocked();
  if (!on_disk.ok()) return {};
  std::set<std::string> listed;
  std::map<int64_t, ManifestModule*> ended;
  for (ManifestModule& module : on_disk->modules) {
    listed.insert(module.files.begin(), module.files.end());
    for (const ManifestStage& stage : module.stages) listed.insert(stage.files.begin(), stage.files.end());
    for (const ManifestKernel& kernel : module.kernels) listed.insert(kernel.files.begin(), kernel.files.end());
    for (const ManifestExecution& execution : module.executions) {
      for (const auto* tensors : {&execution.arguments, &execution.results}) {
        for (const ManifestTensor& tensor : *tensors) listed.insert(tensor.file);
      }
    }
    // kill(pid, 0) fails with ESRCH only when no such process exists; a process of another user
    // (EPERM) still runs.
    const bool gone = module.process > 0 && module.process != ::getpid() &&
                      ::kill(static_cast<pid_t>(module.process), 0) != 0 && errno == ESRCH;
    if (gone) ended[module.id] = &module;
  }
  for (const ManifestGraph& graph : on_disk->graphs) {
    for (const ManifestGraphStage& stage : graph.stages) listed.insert(stage.files.begin(), stage.files.end());
  }
  if (ended.empty()) return {};
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec) || it->is_symlink(type_ec) || IsTemporaryName(name) || listed.count(name)) continue;
    auto module = ended.find(module_id_of(name));
    if (module == ended.end()) continue;
    found.push_back(name);
  }
  if (found.empty()) return {};
  std::sort(found.begin(), found.end());
  for (const std::string& name : found) ended[module_id_of(name)]->files.push_back(name);
  if (Status written = WriteLocked(std::move(*on_disk)); !written.ok()) {
    warnings_.push_back(written.message());
    return {};
  }
  return found;
}

StatusOr<Manifest> ManifestWriter::ReadLocked() {
  std::string kind_error;
  PathKind kind = GetPathKind(path_, &kind_error);
  if (kind == PathKind::kMissing) return Manifest{};
  if (kind != PathKind::kRegular) {
    // A FIFO would block a reader, and replacing a directory or someone's special file is not
    // ours to do: the dump goes on without a manifest.
    if (kind == PathKind::kDirectory) kind_error = DisplayPath(path_) + ": is a directory";
    if (kind == PathKind::kDirectory || kind == PathKind::kOther) kind_error += ", not a manifest file";
    return Error(fmt::format("{}; the manifest is not written (the dump files are)", kind_error));
  }
  // Every write renames a new file into place, so an unchanged identity means nobody else wrote.
  if (last_written_ && IdentityOf(path_) == last_identity_) return *last_written_;
  StatusOr<Manifest> existing = ReadManifest(path_);
  if (existing.ok()) {
    existing->format = kManifestFormat;
    return existing;
  }
  std::error_code ec;
  std::string aside;
  for (int n = 1;; ++n) {
    aside = fmt::format("{}.corrupt.{}", path_, n);
    if (GetPathKind(aside) == PathKind::kMissing || n == 1000) break;
  }
  std::filesystem::rename(path_, aside, ec);
  if (ec) {
    return Error(fmt::format("{}: cannot read it ({}) nor move it aside: {}; manifest.json is not written",
                             DisplayPath(path_), EscapeForTerminal(existing.status().message()),
                             ec.message()));
  }
  warnings_.push_back(fmt::format("{}; kept it as {} and started a new manifest",
                                  EscapeForTerminal(existing.status().message()), DisplayPath(aside)));
  return Manifest{};
}

Status ManifestWriter::WriteLocked(Manifest merged) {
  for (const ManifestModule& ours : manifest_.modules) {
    bool replaced = false;
    for (ManifestModule& theirs : merged.modules) {
      if (theirs.id == ours.id) {
        theirs = ours;
        replaced = true;
        break;
      }
    }
    if (!replaced) merged.modules.push_back(ours);
  }
  for (const ManifestGraph& ours : manifest_.graphs) {
    bool replaced = false;
    for (ManifestGraph& theirs : merged.graphs) {
      if (theirs.process == ours.process && theirs.id == ours.id) {
        theirs = ours;
        replaced = true;
        break;
      }
    }
    if (!replaced) merged.graphs.push_back(ours);
  }
  last_written_.reset();
  RETURN_IF_ERROR(WriteFile(path_, ManifestToJson(merged)));
  if (std::optional<FileIdentity> identity = IdentityOf(path_)) {
    last_identity_ = *identity;
    last_written_ = std::move(merged);
  }
  return OkStatus();
}

std::optional<ManifestWriter::FileIdentity> ManifestWriter::IdentityOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), st.st_size,
                      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace xlens
