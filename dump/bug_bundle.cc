#include "dump/bug_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/flags.h"
#include "dump/manifest.h"
#include "dump/tar_archive.h"

namespace xlens {
namespace {

using Json = nlohmann::ordered_json;

// The parts of a bundle, in the order they are left out when it is too big.
enum class Part { kRequired, kPassDumps, kTrace };

// A file to pack, read when the archive is written (never held whole, but to elide constants).
struct Candidate {
  std::string member;    // name in the archive
  std::string base;      // the directory it is read below, links not followed; empty: `relative`
  std::string relative;  // is a path given by the user (the trace), opened as it is
  Part part = Part::kRequired;
  bool elide = false;    // --strip-constants on HLO text
};

// A manifest path that names a file inside the dump directory, or why it does not.
bool IsPlainRelative(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string::npos) return false;
  for (const auto& component : std::filesystem::path(name)) {
    if (component == ".." || component == "." || component.empty()) return false;
  }
  return true;
}

// Closes a descriptor however the function leaves.
struct Descriptor {
  int fd = -1;
  Descriptor() = default;
  explicit Descriptor(int f) : fd(f) {}
  Descriptor(Descriptor&& other) noexcept : fd(other.fd) { other.fd = -1; }
  Descriptor& operator=(Descriptor&&) = delete;
  Descriptor(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// An open regular file and its size when opened.
struct OpenedFile {
  Descriptor file;
  int64_t size = 0;
};

// Opens `relative` below the directory `base` without following a symbolic link in any of its
// components: a link planted in a dump directory must not pack the file it points to. `base`
// itself is the user's choice and may be a link. The error says why the file was not taken.
StatusOr<OpenedFile> OpenBelow(const std::string& base, const std::string& relative) {
  Descriptor dir{::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) return Error(fmt::format("cannot open {}: {}", DisplayPath(base), std::strerror(errno)));
  auto refused = [&](int at, const std::string& component, int error) {
    struct stat st {};
    if (::fstatat(at, component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      return Error("a symbolic link; not followed, so what it points to stays out of the bundle");
    }
    return Error(std::strerror(error));
  };
  size_t start = 0;
  while (true) {
    const size_t slash = relative.find('/', start);
    if (slash == std::string::npos) break;
    const std::string component = relative.substr(start, slash - start);
    Descriptor next{::openat(dir.fd, component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    if (next.fd < 0) return refused(dir.fd, component, errno);
    std::swap(dir.fd, next.fd);
    start = slash + 1;
  }
  const std::string name = relative.substr(start);
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  OpenedFile opened{Descriptor{::openat(dir.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)}};
  if (opened.file.fd < 0) return refused(dir.fd, name, errno);
  struct stat st {};
  if (::fstat(opened.file.fd, &st) != 0) return Error(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Error("not a regular file");
  if (st.st_size > MaxInputBytes()) {
    return Error(fmt::format("{}, over the input limit {} (--max-input-size)",
                             FormatBytes(st.st_size), FormatBytes(MaxInputBytes())));
  }
  opened.size = st.st_size;
  return opened;
}

// Opens a candidate: below its directory, or the user's own path (the trace).
StatusOr<OpenedFile> OpenCandidate(const Candidate& c) {
  if (!c.base.empty()) return OpenBelow(c.base, c.relative);
  ASSIGN_OR_RETURN(InputFile file, InputFile::Open(c.relative));
  OpenedFile opened{Descriptor{::dup(file.fd())}, file.size()};
  if (opened.file.fd < 0) return Error(fmt::format("{}: {}", DisplayPath(c.relative), std::strerror(errno)));
  return opened;
}

// Reads at most `size` bytes of `file` in pieces, handing each to `piece`.
Status ReadPieces(const OpenedFile& file, const std::function<Status(std::string_view)>& piece) {
  std::vector<char> buffer(256 * 1024);
  int64_t left = file.size;
  while (left > 0) {
    const ssize_t n = ::read(file.file.fd, buffer.data(),
                             static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(buffer.size()))));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(std::strerror(errno));
    if (n == 0) break;  // shorter than when opened: the rest is zeros in the archive
    RETURN_IF_ERROR(piece(std::string_view(buffer.data(), static_cast<size_t>(n))));
    left -= n;
  }
  return OkStatus();
}

bool HoldsConstants(const std::string& name) {
  for (std::string_view suffix : {".ll", ".ptx", ".dot", ".html"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// Flags as a replay would parse them; recorded flags that no longer parse are kept as text.
Json FlagsInEffect(const ManifestInvocation& invocation) {
  std::vector<std::string> tokens;
  for (const std::string* text : {&invocation.tf_xla_flags, &invocation.xla_flags}) {
    StatusOr<std::vector<std::string>> split = SplitFlagString(*text);
    if (!split.ok()) return Json{{"error", split.status().message()}};
    tokens.insert(tokens.end(), split->begin(), split->end());
  }
  StatusOr<DebugOptions> options = ParseDebugOptions(FlagEnvironment{}, tokens);
  if (!options.ok()) return Json{{"error", options.status().message()}};
  Json out = Json::object();
  for (const auto& [name, value] : DebugOptionsValues(*options)) out[name] = value;
  return out;
}

Json PairsToJson(const std::vector<std::pair<std::string, std::string>>& pairs) {
  Json out = Json::object();
  for (const auto& [key, value] : pairs) out[key] = value;
  return out;
}

}  // namespace

std::string ElideLargeConstants(std::string_view text, int64_t max_elements) {
  constexpr std::string_view kOpen = " constant(";
  std::string out;
  size_t at = 0;
  while (true) {
    size_t found = text.find(kOpen, at);
    if (found == std::string_view::npos) break;
    // Only the opcode of an instruction: after " = " on its line, outside quoted metadata.
    const size_t line_start = text.rfind('\n', found) == std::string_view::npos
                                  ? 0
                                  : text.rfind('\n', found) + 1;
    std::string_view head = text.substr(line_start, found - line_start);
    const size_t begin = found + kOpen.size();
    if (head.find(" = ") == std::string_view::npos || head.find('"') != std::string_view::npos) {
      out.append(text.substr(at, begin - at));
      at = begin;
      continue;
    }
    // The literal runs to the parenthesis that closes "constant(".
    int depth = 1;
    int64_t elements = 1;
    size_t i = begin;
    for (; i < text.size() && depth > 0; ++i) {
      const char c = text[i];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == '\n') break;
      if (c == ',' && depth == 1) ++elements;
    }
    if (depth != 0) {  // not a literal as the printer writes it: left alone
      out.append(text.substr(at, i - at));
      at = i;
      continue;
    }
    const size_t close = i - 1;
    std::string_view literal = text.substr(begin, close - begin);
    out.append(text.substr(at, begin - at));
    if (elements > max_elements && literal.starts_with('{')) {
      out.append("{...}");
    } else {
      out.append(literal);
    }
    at = close;
  }
  out.append(text.substr(at));
  return out;
}

StatusOr<Bundle> MakeBundle(const BundleOptions& options) {
  if (!HaveTarGz()) return WriteTarGz({}).status();
  if (options.output.empty()) return Error("a bundle needs an output path");
  const std::filesystem::path dir(options.dump_dir);
  std::string kind_error;
  switch (GetPathKind(options.dump_dir, &kind_error)) {
    case PathKind::kDirectory: break;
    case PathKind::kMissing:
      return Error(fmt::format("{}: no such directory", DisplayPath(options.dump_dir)));
    case PathKind::kRegular:
      return Error(fmt::format("{}: is a file; expected a dump directory (--xla_dump_to)",
                               DisplayPath(options.dump_dir)));
    default: return Error(kind_error);
  }
  const std::string manifest_path = (dir / kManifestFileName).string();
  if (GetPathKind(manifest_path) == PathKind::kMissing) {
    return Error(fmt::format(
        "{}: no manifest.json: not a dump directory (make one with XLA_FLAGS=--xla_dump_to={})",
        DisplayPath(options.dump_dir), DisplayPath(options.dump_dir)));
  }
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(manifest_path));

  Bundle bundle;
  std::vector<Candidate> candidates;
  std::set<std::string> members;
  // Manifest path -> member name; absent: left out.
  std::map<std::string, std::string> kept;
  // Files the manifest lists more than once (every kernel names the module's IR) are taken, or
  // reported, once.
  std::set<std::string> seen;
  // `listed` is read as `relative` below `base`, links not followed.
  auto add_file = [&](const std::string& listed, const std::string& base, const std::string& relative,
                      const std::string& member, Part part) {
    if (!seen.insert(listed).second) return;
    if (members.count(member)) {
      kept[listed] = member;
      return;
    }
    // Opened now to know it can be taken (the reason it cannot is reported); read when written.
    StatusOr<OpenedFile> opened = OpenBelow(base, relative);
    if (!opened.ok()) {
      bundle.dropped.push_back(fmt::format("{}: {}", DisplayPath(listed), opened.status().message()));
      return;
    }
    if (options.strip_constants && HoldsConstants(member)) {
      bundle.dropped.push_back(
          fmt::format("{} (--strip-constants: it holds the constants' values)", member));
      return;
    }
    kept[listed] = member;
    members.insert(member);
    candidates.push_back({member, base, relative, part, options.strip_constants && member.ends_with(".txt")});
  };
  auto add_listed = [&](const std::string& listed, Part part) {
    if (!IsPlainRelative(listed)) {
      if (!seen.insert(listed).second) return;
      bundle.dropped.push_back(fmt::format(
          "{} (the manifest names a file outside the dump directory)", DisplayPath(listed)));
      return;
    }
    add_file(listed, options.dump_dir, listed, listed, part);
  };
  for (const ManifestModule& module : manifest.modules) {
    for (const std::string& file : module.files) add_listed(file, Part::kRequired);
    for (const ManifestKernel& kernel : module.kernels) {
      for (const std::string& file : kernel.files) add_listed(file, Part::kRequired);
    }
    for (const ManifestExecution& execution : module.executions) {
      for (const auto* list : {&execution.arguments, &execution.results}) {
        for (const ManifestTensor& tensor : *list) add_listed(tensor.file, Part::kRequired);
      }
    }
  }
  for (const ManifestModule& module : manifest.modules) {
    for (const ManifestStage& stage : module.stages) {
      for (const std::string& file : stage.files) add_listed(file, Part::kPassDumps);
    }
  }
  // Clustering graphs: those inside the dump directory as listed; those under --graphs by name.
  std::string graphs_canonical;
  if (!options.graphs_dir.empty()) {
    if (GetPathKind(options.graphs_dir) != PathKind::kDirectory) {
      return Error(fmt::format("--graphs {}: not a directory", DisplayPath(options.graphs_dir)));
    }
    graphs_canonical = std::filesystem::weakly_canonical(options.graphs_dir).string();
  }
  for (const ManifestGraph& graph : manifest.graphs) {
    for (const ManifestGraphStage& stage : graph.stages) {
      for (const std::string& file : stage.files) {
        std::filesystem::path path(file);
        if (path.is_absolute() && !graphs_canonical.empty() &&
            std::filesystem::weakly_canonical(path.parent_path()).string() == graphs_canonical) {
          add_file(file, options.graphs_dir, path.filename().string(),
                   "graphs/" + path.filename().string(), Part::kRequired);
        } else if (path.is_absolute()) {
          bundle.dropped.push_back(fmt::format("{} (a clustering graph outside the dump; add "
                                               "its directory with --graphs DIR)",
                                               DisplayPath(file)));
        } else {
          add_listed(file, Part::kRequired);
        }
      }
    }
  }
  if (!graphs_canonical.empty()) {
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(options.graphs_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.ends_with(".pbtxt") || name.ends_with(".pb") || name.ends_with(".dot")) {
        found.push_back(it->path());
      }
    }
    std::sort(found.begin(), found.end());
    for (const auto& path : found) {
      add_file(path.string(), options.graphs_dir, path.filename().string(),
               "graphs/" + path.filename().string(), Part::kRequired);
    }
  }
  if (!options.trace.empty()) {
    const std::string member = "trace/" + std::filesystem::path(options.trace).filename().string();
    Candidate trace{member, "", options.trace, Part::kTrace, false};
    if (StatusOr<OpenedFile> opened = OpenCandidate(trace); !opened.ok()) {
      return opened.status().WithContext("--trace");
    }
    candidates.push_back(std::move(trace));
  }

  // The archive without the parts in `left_out`, its compressed bytes handed to `out` as they are
  // made; what it held, and what it left out, go to `entries` and `dropped_now`.
  auto write_archive = [&](const std::set<Part>& left_out, const TarGzWriter::Output& out,
                           std::vector<BundleEntry>& entries,
                           std::vector<std::string>& dropped_now) -> Status {
    Manifest kept_manifest = manifest;
    auto keep = [&](std::vector<std::string>& files, Part part) {
      std::vector<std::string> out;
      for (const std::string& file : files) {
        auto it = kept.find(file);
        if (it != kept.end() && !left_out.count(part)) out.push_back(it->second);
      }
      files = std::move(out);
    };
    for (ManifestModule& module : kept_manifest.modules) {
      keep(module.files, Part::kRequired);
      for (ManifestStage& stage : module.stages) keep(stage.files, Part::kPassDumps);
      for (ManifestKernel& kernel : module.kernels) keep(kernel.files, Part::kRequired);
      std::vector<ManifestExecution> executions;
      for (const ManifestExecution& execution : module.executions) {
        bool whole = true;
        for (const auto* list : {&execution.arguments, &execution.results}) {
          for (const ManifestTensor& tensor : *list) whole = whole && kept.count(tensor.file);
        }
        if (whole) executions.push_back(execution);
      }
      module.executions = std::move(executions);
    }
    for (ManifestGraph& graph : kept_manifest.graphs) {
      for (ManifestGraphStage& stage : graph.stages) keep(stage.files, Part::kRequired);
    }

    Json environment = Json::object();
    environment["xlens"] = PairsToJson(options.xlens);
    environment["host"] = PairsToJson(options.host);
    Json recorded = Json::array();
    for (const ManifestModule& module : manifest.modules) {
      if (module.invocation.empty()) continue;
      const ManifestInvocation& i = module.invocation;
      Json command_line = Json::array();
      for (const std::string& arg : i.command_line) command_line.push_back(arg);
      recorded.push_back(Json{{"module", module.id},
                              {"name", module.name},
                              {"command_line", std::move(command_line)},
                              {"backend", i.backend},
                              {"xla_flags", i.xla_flags},
                              {"tf_xla_flags", i.tf_xla_flags},
                              {"flags", FlagsInEffect(i)}});
    }
    environment["compilations"] = std::move(recorded);
    Json command_line = Json::array();
    for (const std::string& arg : options.command_line) command_line.push_back(arg);
    Json dropped = Json::array();
    dropped_now = bundle.dropped;
    if (left_out.count(Part::kPassDumps)) {
      dropped_now.push_back("the per-pass dumps (over --max-size)");
    }
    if (left_out.count(Part::kTrace)) dropped_now.push_back("the trace (over --max-size)");
    for (const std::string& line : dropped_now) dropped.push_back(line);
    environment["bundle"] = Json{{"command_line", std::move(command_line)},
                                 {"strip_constants", options.strip_constants},
                                 {"dropped", std::move(dropped)}};

    entries.clear();
    ASSIGN_OR_RETURN(std::unique_ptr<TarGzWriter> writer, TarGzWriter::Open(out));
    auto add_text = [&](const std::string& name, const std::string& text) -> Status {
      RETURN_IF_ERROR(writer->Begin(name, static_cast<int64_t>(text.size())));
      RETURN_IF_ERROR(writer->Write(text));
      entries.push_back({name, static_cast<int64_t>(text.size())});
      return OkStatus();
    };
    RETURN_IF_ERROR(add_text(std::string(kManifestFileName), ManifestToJson(kept_manifest)));
    RETURN_IF_ERROR(add_text(std::string(kBundleEnvironmentFile), environment.dump(2) + "\n"));
    for (const Candidate& c : candidates) {
      if (left_out.count(c.part)) continue;
      // Opened again: it was checked when gathered, and may have changed since.
      StatusOr<OpenedFile> opened = OpenCandidate(c);
      auto changed = [&](const Status& status) {
        return Error(fmt::format("{} changed while the bundle was written: {}",
                                 DisplayPath(c.base.empty() ? c.relative : c.base + "/" + c.relative),
                                 status.message()));
      };
      if (!opened.ok()) return changed(opened.status());
      if (c.elide) {
        // Constants are elided in the whole text: this one file is held, within the input limit.
        std::string text;
        text.reserve(static_cast<size_t>(opened->size));
        if (Status read = ReadPieces(*opened, [&](std::string_view piece) {
              text.append(piece);
              return OkStatus();
            });
            !read.ok()) {
          return changed(read);
        }
        RETURN_IF_ERROR(add_text(c.member, ElideLargeConstants(text)));
        continue;
      }
      RETURN_IF_ERROR(writer->Begin(c.member, opened->size));
      Status status = OkStatus();
      if (Status read = ReadPieces(*opened, [&](std::string_view piece) {
            status = writer->Write(piece);
            return status;
          });
          !read.ok()) {
        return status.ok() ? changed(read) : status;
      }
      entries.push_back({c.member, opened->size});
    }
    return writer->Close();
  };

  // Under --max-size, the optional parts are left out in order until the bundle fits, each try
  // counted without being kept (it stops as soon as it is over); then the one that fits is written.
  std::set<Part> left_out;
  std::vector<BundleEntry> entries;
  std::vector<std::string> dropped_now;
  if (options.max_bytes >= 0) {
    for (Part next : {Part::kPassDumps, Part::kTrace, Part::kRequired}) {
      int64_t size = 0;
      const bool last = next == Part::kRequired;
      Status counted = write_archive(
          left_out,
          [&](std::string_view data) {
            size += static_cast<int64_t>(data.size());
            // The last try is counted whole, for the message.
            if (!last && size > options.max_bytes) return Error("over --max-size");
            return OkStatus();
          },
          entries, dropped_now);
      if (counted.ok() && size <= options.max_bytes) break;
      if (!counted.ok() && (last || size <= options.max_bytes)) return counted;
      if (last) {
        return Error(fmt::format(
            "the bundle is {} even without the per-pass dumps and the trace, over --max-size {}",
            FormatBytes(size), FormatBytes(options.max_bytes)));
      }
      // Only a part that is there counts as left out.
      bool present = false;
      for (const Candidate& c : candidates) present = present || c.part == next;
      if (present) left_out.insert(next);
    }
  }
  ASSIGN_OR_RETURN(OutputFile output, OutputFile::Create(options.output));
  int64_t size = 0;
  RETURN_IF_ERROR(write_archive(
      left_out,
      [&](std::string_view data) {
        size += static_cast<int64_t>(data.size());
        return output.Write(data);
      },
      entries, dropped_now));
  RETURN_IF_ERROR(output.Commit());
  bundle.size = size;
  bundle.entries = std::move(entries);
  bundle.dropped = std::move(dropped_now);
  return bundle;
}

}  // namespace xlens
