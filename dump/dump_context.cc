#include "dump/dump_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

#include "compiler/hlo/dot_printer.h"
#include "compiler/hlo/printer.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_names.h"
#include "dump/graphviz.h"
#include "dump/hlo_snapshot.h"
#include "dump/html_page.h"

namespace xlens {
namespace {

// Module ids are handed out per dump directory across the whole process, so two contexts that
// dump into one directory (two compilations in one program) never reuse an id.
struct DirectoryIds {
  int64_t next_id = 1;
  std::set<int64_t> dumped;
};

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, DirectoryIds>& Registry() {
  static auto* registry = new std::map<std::string, DirectoryIds>();
  return *registry;
}

std::string RegistryKey(const std::string& directory) {
  if (directory.empty() || directory == "-") return directory;
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(directory, ec);
  return ec ? directory : canonical.string();
}

// The module ids of the dump files already in `directory`.
std::set<int64_t> IdsOnDisk(const std::string& directory) {
  std::set<int64_t> ids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory, ec), end; !ec && it != end;
       it.increment(ec)) {
    int64_t id = ModuleIdFromFileName(it->path().filename().string());
    if (id >= 0) ids.insert(id);
  }
  return ids;
}

std::optional<DumpRegex> CompileRegex(const std::string& pattern, std::string_view flag,
                                      std::vector<std::string>& warnings) {
  if (pattern.empty()) return std::nullopt;
  StatusOr<DumpRegex> regex = DumpRegex::Compile(pattern);
  if (regex.ok()) return *regex;
  warnings.push_back(fmt::format("--{}={} is not a regular expression ({}); it matches nothing",
                                 flag, DisplayText(pattern), regex.status().message()));
  // "[^\x00-\x{10FFFF}]" matches no character, so it matches no name.
  return *DumpRegex::Compile("[^\\x00-\\x{10FFFF}]");
}

std::mutex& CommandLineMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& CommandLine() {
  static auto* command_line = new std::vector<std::string>();
  return *command_line;
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DumpContext::DumpContext(DebugOptions options, DumpContextOptions context_options)
    : options_(std::move(options)), context_options_(std::move(context_options)) {
  const bool format_chosen = options_.xla_dump_hlo_as_text || options_.xla_dump_hlo_as_dot ||
                             options_.xla_dump_hlo_as_html;
  as_text_ = options_.xla_dump_hlo_as_text || !format_chosen;
  dump_to_ = options_.xla_dump_to;
  if (dump_to_.empty() && format_chosen) dump_to_.assign(1, '-');
  module_re_ = CompileRegex(options_.xla_dump_hlo_module_re, "xla_dump_hlo_module_re", warnings_);
  pass_re_ = CompileRegex(options_.xla_dump_hlo_pass_re, "xla_dump_hlo_pass_re", warnings_);
  if (enabled() && !dumping_to_stdout()) manifest_.emplace(dump_to_);
}

DumpContext::~DumpContext() {
  std::lock_guard lock(mu_);
  WriteManifest();
}

bool DumpContext::ShouldDumpPass(std::string_view after_pass, std::string_view before_pass) const {
  if (!enabled() || !pass_re_) return false;
  auto matches = [&](std::string_view name) {
    return pass_re_->PartialMatch(name);
  };
  return matches(after_pass) || matches(before_pass);
}

int64_t DumpContext::BeginModule(const HloModule& module) {
  std::lock_guard lock(mu_);
  return StateFor(module).id;
}

bool DumpContext::IsDumped(const HloModule& module) {
  std::lock_guard lock(mu_);
  return StateFor(module).dumped;
}

DumpContext::ModuleState& DumpContext::StateFor(const HloModule& module) {
  auto it = modules_.find(&module);
  if (it != modules_.end()) return it->second;
  if (auto ended = ended_.find(&module);
      ended != ended_.end() && ended->second.first == module.name()) {
    return modules_[&module] = ended->second.second;
  }
  ModuleState& state = modules_[&module];
  const std::string& name = module.name();
  bool wanted = enabled() && (!module_re_ || module_re_->PartialMatch(name));
  bool over_limit = false;
  {
    std::lock_guard registry_lock(RegistryMutex());
    DirectoryIds& ids = Registry()[RegistryKey(dump_to_)];
    if (wanted && manifest_ && EnsureDirectory()) {
      // The id is taken under the directory's lock and recorded in the manifest before the lock
      // is let go, so compilations in other processes dumping here at the same time take others.
      ManifestWriter::Claim claim = manifest_->ClaimModule(
          name, ids.next_id, options_.xla_dump_max_hlo_modules, [&] {
            std::set<int64_t> in_use = IdsOnDisk(directory());
            in_use.insert(ids.dumped.begin(), ids.dumped.end());
            return in_use;
          });
      state.id = claim.id;
      over_limit = !claim.recorded;
      TakeManifestWarnings();
      if (!claim.problem.empty()) ManifestProblem(claim.problem);
    } else {
      std::set<int64_t> on_disk;
      if (!directory().empty()) on_disk = IdsOnDisk(directory());
      if (!on_disk.empty()) ids.next_id = std::max(ids.next_id, *on_disk.rbegin() + 1);
      state.id = ids.next_id;
      if (wanted && options_.xla_dump_max_hlo_modules >= 0) {
        on_disk.insert(ids.dumped.begin(), ids.dumped.end());
        over_limit = static_cast<int64_t>(on_disk.size()) >= options_.xla_dump_max_hlo_modules;
      }
    }
    ids.next_id = std::max(ids.next_id, state.id + 1);
    state.dumped = wanted && !over_limit;
    if (state.dumped && manifest_) {
      ManifestInvocation invocation;
      {
        std::lock_guard command_line_lock(CommandLineMutex());
        invocation.command_line = CommandLine();
      }
      invocation.backend = backend_;
      FlagStrings flags = DebugOptionsToFlags(options_);
      invocation.xla_flags = std::move(flags.xla_flags);
      invocation.tf_xla_flags = std::move(flags.tf_xla_flags);
      manifest_->SetInvocation(state.id, std::move(invocation));
      manifest_dirty_ = true;
    }
    if (state.dumped) ids.dumped.insert(state.id);
  }
  if (over_limit) {
    Warn(
        fmt::format("--xla_dump_max_hlo_modules={}: {} already holds that many modules; later "
                    "modules are not dumped",
                    options_.xla_dump_max_hlo_modules, dump_to_));
  }
  if (options_.xla_dump_include_timestamp) {
    state.timestamp = TimestampPrefix(context_options_.fixed_timestamp_us.value_or(NowMicros()));
  }
  return state;
}

std::string DumpContext::NameFor(const HloModule& module, const ModuleState& state,
                                 std::string_view suffix, bool timestamped) const {
  return DumpFileName(state.id, module.name(), timestamped ? state.timestamp : "", suffix);
}

std::string DumpContext::FileNameFor(const HloModule& module, std::string_view suffix,
                                     bool timestamped) {
  std::lock_guard lock(mu_);
  return NameFor(module, StateFor(module), suffix, timestamped);
}

bool DumpContext::EnsureDirectory() {
  if (directory_ready_) return true;
  if (directory_failed_) return false;
  if (Status created = CreateDirectories(dump_to_); !created.ok()) {
    directory_failed_ = true;
    Warn(fmt::format("cannot create the dump directory (--xla_dump_to): {}; nothing is dumped",
                     created.message()));
    return false;
  }
  directory_ready_ = true;
  // A compilation killed while writing left its temporaries here; they are no one's now. Only our
  // own temporary names whose writing process is gone are removed. The files it had written but
  // not yet listed are listed now, under their modules.
  RemoveStaleTemporaries(dump_to_);
  if (manifest_) manifest_->ListFilesOfEndedWriters(ModuleIdFromFileName);
  return true;
}

std::optional<std::string> DumpContext::Emit(const std::string& file_name,
                                             std::string_view contents, bool allowed_on_stdout) {
  if (dumping_to_stdout()) {
    if (!allowed_on_stdout) {
      Warn("refusing to print .dot and .html dumps to stdout; pass --xla_dump_to=DIR to get them");
      return std::nullopt;
    }
    std::ostream& out =
        context_options_.stdout_stream ? *context_options_.stdout_stream : std::cout;
    out << "*** Begin " << file_name << " ***\n"
        << contents << "\n*** End " << file_name << " ***" << std::endl;
    return std::nullopt;
  }
  if (!EnsureDirectory()) return std::nullopt;
  Status status = WriteFile((std::filesystem::path(dump_to_) / file_name).string(), contents);
  if (!status.ok()) {
    if (failed_writes_++ == 0) first_write_error_ = status.message();
    return std::nullopt;
  }
  ++written_files_;
  return file_name;
}

std::vector<std::string> DumpContext::DumpFormats(const HloModule& module, const ModuleState& state,
                                                  const std::string& base) {
  std::vector<std::string> files;
  auto emit = [&](const std::string& name, std::string_view contents, bool on_stdout) {
    if (std::optional<std::string> written = Emit(name, contents, on_stdout)) {
      files.push_back(*written);
    }
  };
  std::string text = PrintModule(module);
  if (options_.xla_dump_disable_metadata) text = StripHloMetadata(text);
  if (as_text_) emit(base + ".txt", text, true);
  if (!dump_as_dot() && !dump_as_html()) return files;
  if (dumping_to_stdout()) {
    Emit(base + ".dot", "", false);
    return files;
  }
  StatusOr<std::string> dot = ModuleToDot(module);
  if (!dot.ok()) {
    Warn(
        fmt::format("cannot draw module {} as a graph: {}", module.name(), dot.status().message()));
    return files;
  }
  if (dump_as_dot()) emit(base + ".dot", *dot, false);
  if (dump_as_html()) {
    StatusOr<std::string> svg = RenderDotToSvg(*dot, context_options_.dot_program);
    if (!svg.ok()) {
      Warn(fmt::format("{}; .html dumps show the DOT source instead of a picture",
                       svg.status().message()));
    }
    emit(base + ".html", HloHtmlPage(base, text, *dot, svg), false);
  }
  return files;
}

std::vector<std::string> DumpContext::DumpModule(
    const HloModule& module, std::string_view name,
    std::optional<std::string_view> buffer_assignment) {
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped) return {};
  // As XLA: the 255-character rule applies to the name before its extension.
  std::string base = NameFor(module, state, name, /*timestamped=*/true);
  std::vector<std::string> files = DumpFormats(module, state, base);
  if (buffer_assignment && as_text_) {
    std::string file = NameFor(module, state, BufferAssignmentSuffix(name), true);
    if (std::optional<std::string> written = Emit(file, *buffer_assignment, true)) {
      files.push_back(*written);
    }
  }
  if (manifest_ && !files.empty()) {
    for (const std::string& file : files) manifest_->AddModuleFile(state.id, file);
    manifest_dirty_ = true;
    // Listed as soon as they are on disk, so a compilation killed later leaves a manifest that
    // lists what it wrote.
    WriteManifest();
  }
  return files;
}

std::vector<std::string> DumpContext::DumpPassBoundary(const HloModule& module, int64_t step,
                                                       std::string_view pipeline,
                                                       std::string_view after_pass,
                                                       std::string_view before_pass) {
  if (!ShouldDumpPass(after_pass, before_pass)) return {};
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped) return {};
  if (step < 0) step = state.next_step++;
  std::string base =
      NameFor(module, state, PassBoundaryName(step, pipeline, after_pass, before_pass), true);
  return DumpFormats(module, state, base);
}

std::string DumpContext::DumpText(const HloModule& module, std::string_view suffix,
                                  std::string_view text) {
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped) return "";
  std::optional<std::string> written = Emit(NameFor(module, state, suffix, false), text, true);
  if (!written) return "";
  if (manifest_) {
    manifest_->AddModuleFile(state.id, *written);
    manifest_dirty_ = true;
    WriteManifest();
  }
  return *written;
}

void DumpContext::SetBackend(std::string backend) {
  std::lock_guard lock(mu_);
  backend_ = std::move(backend);
}

bool DumpContext::WantsExecution(const HloModule& module) {
  if (!options_.xla_dump_hlo_snapshots || !enabled() || dumping_to_stdout()) return false;
  std::lock_guard lock(mu_);
  const ModuleState& state = StateFor(module);
  const int64_t limit = options_.xla_dump_max_hlo_snapshots;
  return state.dumped && (limit < 0 || state.executions < limit);
}

std::vector<std::string> DumpContext::DumpExecution(const HloModule& module,
                                                    const std::vector<Literal>& arguments,
                                                    const Literal& result) {
  if (!WantsExecution(module)) return {};
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  const int64_t execution = ++state.executions;
  StatusOr<std::vector<SnapshotTensor>> tensors = SerializeExecution(execution, arguments, result);
  if (!tensors.ok()) {
    Warn(fmt::format("no snapshot of module {} (--xla_dump_hlo_snapshots): {}", module.name(),
                     tensors.status().message()));
    return {};
  }
  ManifestExecution record;
  record.execution = execution;
  std::vector<std::string> files;
  for (const SnapshotTensor& tensor : *tensors) {
    std::optional<std::string> written =
        Emit(NameFor(module, state, tensor.suffix, false), tensor.npy, false);
    if (!written) return files;  // counted and reported by Emit; the manifest lists none of them
    files.push_back(*written);
    ManifestTensor entry{*written, tensor.shape, SnapshotChecksum(tensor.npy),
                         static_cast<int64_t>(tensor.npy.size())};
    const bool is_result = tensor.suffix.find(".out") != std::string::npos;
    (is_result ? record.results : record.arguments).push_back(std::move(entry));
  }
  if (manifest_) {
    manifest_->AddExecution(state.id, std::move(record));
    manifest_dirty_ = true;
    WriteManifest();
  }
  return files;
}

void DumpContext::RecordStage(const HloModule& module, ManifestStage stage) {
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped || !manifest_) return;
  // A stage with files is written now (its files are on disk already); one without waits for the
  // next write, which keeps a pipeline without between-pass dumps to a few manifest writes.
  const bool has_files = !stage.files.empty();
  manifest_->AddStage(state.id, std::move(stage));
  manifest_dirty_ = true;
  if (has_files) WriteManifest();
}

void DumpContext::RecordKernel(const HloModule& module, ManifestKernel kernel) {
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped || !manifest_) return;
  manifest_->AddKernel(state.id, std::move(kernel));
  manifest_dirty_ = true;
}

void DumpContext::RecordFusionDecision(const HloModule& module, ManifestFusionDecision decision) {
  std::lock_guard lock(mu_);
  ModuleState& state = StateFor(module);
  if (!state.dumped || !manifest_) return;
  manifest_->AddFusionDecision(state.id, std::move(decision));
  manifest_dirty_ = true;
}

bool DumpContext::RecordsManifest(const HloModule& module) {
  std::lock_guard lock(mu_);
  return manifest_.has_value() && StateFor(module).dumped;
}

void DumpContext::RecordClusteringGraph(ManifestGraph graph) {
  std::lock_guard lock(mu_);
  if (!manifest_) return;
  manifest_->AddGraph(std::move(graph));
  manifest_dirty_ = true;
  WriteManifest();
}

void DumpContext::RecordClusterModule(const std::string& cluster, const std::string& module_name) {
  std::lock_guard lock(mu_);
  if (!manifest_ || !manifest_->AddClusterModule(cluster, module_name)) return;
  manifest_dirty_ = true;
  WriteManifest();
}

void DumpContext::EndModule(const HloModule& module) {
  std::lock_guard lock(mu_);
  auto it = modules_.find(&module);
  if (it == modules_.end()) return;
  if (it->second.dumped && manifest_) {
    manifest_->AddModule(it->second.id, module.name());
    manifest_dirty_ = true;
  }
  ended_[&module] = {module.name(), it->second};
  modules_.erase(it);
  WriteManifest();
}

void DumpContext::FlushManifest() {
  std::lock_guard lock(mu_);
  WriteManifest();
}

void DumpContext::WriteManifest() {
  if (!manifest_ || !manifest_dirty_ || !EnsureDirectory()) return;
  manifest_dirty_ = false;
  Status status = manifest_->Write();
  TakeManifestWarnings();
  manifest_written_ = status.ok();
  if (!status.ok()) ManifestProblem(status.message());
}

void DumpContext::TakeManifestWarnings() {
  const std::vector<std::string>& all = manifest_->warnings();
  for (; manifest_warnings_taken_ < all.size(); ++manifest_warnings_taken_) {
    Warn(all[manifest_warnings_taken_]);
  }
}

void DumpContext::ManifestProblem(const std::string& message) {
  if (manifest_problem_.empty()) manifest_problem_ = message;
  Warn(message);
}

void DumpContext::Warn(std::string message) {
  if (std::find(warnings_.begin(), warnings_.end(), message) == warnings_.end()) {
    warnings_.push_back(std::move(message));
  }
}

std::vector<std::string> DumpContext::warnings() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out = warnings_;
  if (failed_writes_ > 0) {
    out.push_back(fmt::format("could not write {} dump file{} into {} (--xla_dump_to): {}",
                              failed_writes_, failed_writes_ == 1 ? "" : "s", dump_to_,
                              first_write_error_));
  }
  return out;
}

std::string DumpContext::Summary() const {
  std::lock_guard lock(mu_);
  const std::string dir = DisplayPath(dump_to_);
  if (directory_failed_) return fmt::format("nothing dumped: the directory {} could not be created", dir);
  if (written_files_ == 0 && failed_writes_ == 0) {
    return fmt::format(
        "nothing dumped to {}: no module was selected (--xla_dump_hlo_module_re, "
        "--xla_dump_max_hlo_modules)",
        dir);
  }
  if (written_files_ == 0) {
    return fmt::format("nothing dumped to {}: none of the {} file{} could be written", dir,
                       failed_writes_, failed_writes_ == 1 ? "" : "s");
  }
  std::string files = fmt::format("{} file{}", written_files_, written_files_ == 1 ? "" : "s");
  std::string failed = failed_writes_ == 0
                           ? ""
                           : fmt::format("; {} more could not be written", failed_writes_);
  const bool listed = manifest_written_ && !manifest_dirty_;
  if (!listed) {
    return fmt::format("dumped {} to {}{}; manifest.json was not written, so nothing lists them",
                       files, dir, failed);
  }
  return fmt::format("dumped {} to {}{} (manifest.json lists {})", files, dir, failed,
                     failed_writes_ == 0 ? "every file" : "the files written");
}

void SetDumpCommandLine(std::vector<std::string> arguments) {
  std::lock_guard lock(CommandLineMutex());
  CommandLine() = std::move(arguments);
}

std::string StripHloMetadata(std::string_view hlo_text) {
  constexpr std::string_view kKey = ", metadata={";
  std::string out;
  out.reserve(hlo_text.size());
  size_t at = 0;
  while (true) {
    size_t found = hlo_text.find(kKey, at);
    if (found == std::string_view::npos) break;
    // Skip to the matching brace; braces inside quoted values do not count.
    size_t i = found + kKey.size();
    int depth = 1;
    bool quoted = false;
    for (; i < hlo_text.size() && depth > 0; ++i) {
      char c = hlo_text[i];
      if (quoted) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          quoted = false;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        --depth;
      } else if (c == '\n') {
        break;
      }
    }
    if (depth != 0) {
      // Not metadata as the printer writes it; leave the text alone.
      out.append(hlo_text.substr(at, i - at));
      at = i;
      continue;
    }
    out.append(hlo_text.substr(at, found - at));
    at = i;
  }
  out.append(hlo_text.substr(at));
  return out;
}

}  // namespace xlens
