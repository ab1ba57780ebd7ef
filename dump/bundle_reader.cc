#include "dump/bundle_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/bug_bundle.h"
#include "dump/tar_archive.h"

namespace xlens {
namespace {

// One member's file below the private directory, written as its data arrives.
class MemberFile : public TarMemberSink {
 public:
  MemberFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  ~MemberFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Write(std::string_view data) override {
    size_t written = 0;
    while (written < data.size()) {
      const ssize_t n = ::write(fd_, data.data() + written, data.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Failed(errno);
      written += static_cast<size_t>(n);
    }
    return OkStatus();
  }
  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Failed(errno);
    return OkStatus();
  }

 private:
  Status Failed(int error) const {
    return Error(fmt::format("cannot unpack {}: {}", DisplayPath(name_), std::strerror(error)));
  }
  int fd_;
  std::string name_;
};

// Makes one member's file below `root`, and its directories; never follows a link, never
// replaces.
StatusOr<std::unique_ptr<TarMemberSink>> CreateMember(const std::string& root,
                                                      const std::string& name,
                                                      std::set<std::string>& directories) {
  std::string path = root;
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    if (slash == std::string::npos) break;
    path += "/" + name.substr(start, slash - start);
    if (!directories.count(path)) {
      if (::mkdir(path.c_str(), 0700) != 0) {
        return Error(fmt::format("cannot make the directory of {}: {}", DisplayPath(name),
                                 std::strerror(errno)));
      }
      directories.insert(path);
    }
    start = slash + 1;
  }
  path += "/" + name.substr(start);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Error(fmt::format("cannot unpack {}: {}", DisplayPath(name), std::strerror(errno)));
  }
  return std::unique_ptr<TarMemberSink>(std::make_unique<MemberFile>(fd, name));
}

// Adds the bundle's name to a member's errors.
class NamedSink : public TarMemberSink {
 public:
  NamedSink(std::unique_ptr<TarMemberSink> inner, std::string shown)
      : inner_(std::move(inner)), shown_(std::move(shown)) {}
  Status Write(std::string_view data) override {
    Status s = inner_->Write(data);
    return s.ok() ? s : s.WithContext(shown_);
  }
  Status Close() override {
    Status s = inner_->Close();
    return s.ok() ? s : s.WithContext(shown_);
  }

 private:
  std::unique_ptr<TarMemberSink> inner_;
  std::string shown_;
};

}  // namespace

TarReadLimits BundleReadLimits() {
  TarReadLimits limits;
  limits.max_total_bytes = MaxInputBytes();
  limits.max_members = kMaxBundleMembers;
  // A limit the user chose is theirs to judge; the default one is also held to a ratio.
  if (MaxInputBytes() == kDefaultMaxInputBytes) {
    limits.max_ratio = kMaxBundleExpansion;
    limits.ratio_free_bytes = kBundleExpansionFreeBytes;
  }
  return limits;
}

int64_t MaxBundleJsonBytes() {
  return MaxInputBytes() == kDefaultMaxInputBytes ? std::min(kMaxBundleJsonBytes, MaxInputBytes())
                                                  : MaxInputBytes();
}

std::string CheckBundleMemberName(const std::string& name) {
  if (name.empty()) return "an empty name";
  if (name.size() > 1024) return "a name longer than 1024 bytes";
  if (name.front() == '/') return "an absolute path";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "a control character in its name";
    if (c == '\\') return "a backslash in its name";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    std::string_view component(name.data() + start, slash - start);
    if (component == "..") return "a '..' component, which points outside the bundle";
    if (component == ".") return "a '.' component";
    // A trailing slash is how tar names a directory; an empty component elsewhere is not.
    if (component.empty() && slash != name.size()) return "an empty path component";
    if (component.size() > 255) return "a path component longer than 255 bytes";
    start = slash + 1;
  }
  return "";
}

StatusOr<UnpackedBundle> UnpackBundle(const std::string& path, const std::string& parent) {
  ActivityScope activity("reading bundle " + path);
  ASSIGN_OR_RETURN(TemporaryDirectory directory, TemporaryDirectory::Create("replay", parent));
  const std::string shown = DisplayPath(path);
  std::set<std::string> names, made_directories;
  std::vector<std::string> files;
  // `tar czf B -C DIR .` names members ./manifest.json, and the root "./": a bundle repacked by
  // hand reads like one written by xlens.
  auto normalized = [](std::string name) {
    while (name.starts_with("./")) name.erase(0, 2);
    return name;
  };
  auto check = [&](const TarHeader& original) -> Status {
    TarHeader header = original;
    header.name = normalized(header.name);
    if (header.kind == TarMemberKind::kDirectory && (header.name.empty() || header.name == ".")) {
      return OkStatus();
    }
    const std::string why = CheckBundleMemberName(header.name);
    if (!why.empty()) {
      return Error(fmt::format("{}: member {} refused: {}", shown, DisplayPath(header.name), why));
    }
    if (header.kind != TarMemberKind::kRegular && header.kind != TarMemberKind::kDirectory) {
      return Error(fmt::format("{}: member {} refused: it is {}{}; a bundle holds regular files "
                               "only",
                               shown, DisplayPath(header.name), TarMemberKindName(header.kind),
                               header.link_target.empty()
                                   ? ""
                                   : " to " + DisplayPath(header.link_target)));
    }
    // Parsed whole, so refused by the size its header claims before any of it expands (the
    // count as it expands holds it to the same bound: see ReadTarGz).
    if (header.kind == TarMemberKind::kRegular &&
        (header.name == kManifestFileName || header.name == kBundleEnvironmentFile) &&
        header.size > MaxBundleJsonBytes()) {
      return Error(fmt::format(
          "{}: member {} is {}, over the {} a bundle's JSON may be (it is read whole, and a JSON "
          "tree takes several times its text); refused before unpacking it; a limit given with "
          "--max-input-size replaces this one if the bundle is genuine",
          shown, header.name, FormatBytes(header.size), FormatBytes(MaxBundleJsonBytes())));
    }
    std::string key = header.name;
    while (key.ends_with('/')) key.pop_back();
    if (!names.insert(key).second) {
      return Error(fmt::format("{}: member {} refused: a second member of the same name", shown,
                               DisplayPath(header.name)));
    }
    // A directory is made when a file inside needs it; a later file of its name is refused above.
    return OkStatus();
  };
  auto open = [&](const TarHeader& header) -> StatusOr<std::unique_ptr<TarMemberSink>> {
    const std::string name = normalized(header.name);
    auto sink = CreateMember(directory.path(), name, made_directories);
    if (!sink.ok()) return sink.status().WithContext(shown);
    files.push_back(name);
    return std::unique_ptr<TarMemberSink>(std::make_unique<NamedSink>(std::move(sink).value(), shown));
  };
  RETURN_IF_ERROR(ReadTarGz(path, BundleReadLimits(), check, open));
  if (std::find(files.begin(), files.end(), std::string(kManifestFileName)) == files.end()) {
    return Error(fmt::format("{}: not an xlens bundle: it has no manifest.json", shown));
  }
  UnpackedBundle bundle{std::move(directory), {}, std::move(files), false, {}};
  // Parsed from the text, so that messages name the bundle's member rather than the private copy.
  ASSIGN_OR_RETURN(std::string manifest_text,
                   ReadFile(bundle.directory.path() + "/" + std::string(kManifestFileName),
                            MaxBundleJsonBytes()));
  StatusOr<Manifest> manifest = ParseManifest(manifest_text);
  if (!manifest.ok()) {
    return Error(fmt::format("{}: its manifest.json: {}", shown, manifest.status().message()));
  }
  bundle.manifest = *std::move(manifest);
  const std::string environment_path =
      bundle.directory.path() + "/" + std::string(kBundleEnvironmentFile);
  if (GetPathKind(environment_path) == PathKind::kRegular) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(environment_path, MaxBundleJsonBytes()));
    nlohmann::json environment = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (environment.is_discarded() || !environment.is_object()) {
      return Error(fmt::format("{}: its environment.json is not a JSON object", shown));
    }
    auto it = environment.find("bundle");
    if (it != environment.end() && it->is_object()) {
      auto strip = it->find("strip_constants");
      bundle.strip_constants = strip != it->end() && strip->is_boolean() && strip->get<bool>();
    }
    for (const char* section : {"xlens", "host"}) {
      auto s = environment.find(section);
      if (s == environment.end() || !s->is_object()) continue;
      for (auto item = s->begin(); item != s->end(); ++item) {
        if (item.value().is_string()) {
          bundle.recorded_host.emplace_back(item.key(), item.value().get<std::string>());
        }
      }
    }
  }
  return bundle;
}

}  // namespace xlens
