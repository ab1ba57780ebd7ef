#include "compiler/support/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens {

namespace {

std::atomic<int64_t> g_max_input_bytes{-1};

std::string Errno(int error) { return std::strerror(error); }

// A path as it appears in a message: control characters escaped, very long paths shortened.
std::string Shown(const std::string& path) { return DisplayPath(path); }

const char* KindOfMode(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string OpenError(const std::string& path, int error) {
  switch (error) {
    case ELOOP:
      return fmt::format("{}: cannot open: too many levels of symbolic links (a symlink loop?)", Shown(path));
    case ENAMETOOLONG:
      return fmt::format("{}: cannot open: file name too long ({} bytes)", Shown(path), path.size());
    case ENOTDIR:
      return fmt::format("{}: cannot open: a component of the path is not a directory", Shown(path));
    default: return fmt::format("{}: cannot open: {}", Shown(path), Errno(error));
  }
}

int64_t Limit(int64_t max_bytes) { return max_bytes >= 0 ? max_bytes : MaxInputBytes(); }

std::string TooLarge(const std::string& path, int64_t size, int64_t limit, bool exact) {
  return fmt::format(
      "{}: {}{} is more than the {} limit on input files (raise it with --max-input-size=SIZE or "
      "XLENS_MAX_INPUT_SIZE)",
      Shown(path), exact ? "" : "over ", FormatBytes(size), FormatBytes(limit));
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Follows symlinks to the path a write must replace. A dangling link resolves to where it
// points, so the write creates the target and keeps the link.
StatusOr<std::string> ResolveSymlinks(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      if (errno == ENOENT) return current;
      return Error(OpenError(path, errno));
    }
    if (!S_ISLNK(st.st_mode)) return current;
    std::string target(4096, '\0');
    ssize_t n = ::readlink(current.c_str(), target.data(), target.size());
    if (n < 0) return Error(OpenError(path, errno));
    target.resize(static_cast<size_t>(n));
    current = (!target.empty() && target[0] == '/') ? target : DirName(current) + "/" + target;
  }
  return Error(OpenError(path, ELOOP));
}

std::atomic<int> g_temp_counter{0};

// Creates (O_EXCL) a temporary beside `target` for a write to `path`; its descriptor, and its
// name in `temp_path`.
StatusOr<int> CreateTemporary(const std::string& path, const std::string& target, int flags,
                              mode_t mode, std::string* temp_path) {
  std::string dir = DirName(target);
  for (int attempt = 0;; ++attempt) {
    *temp_path = fmt::format("{}/{}.xlens-tmp.{}.{}", dir, BaseName(target), ::getpid(),
                             g_temp_counter.fetch_add(1));
    int fd = ::open(temp_path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | flags, mode);
    if (fd >= 0) return fd;
    if (errno == EEXIST && attempt < 100) continue;
    int error = errno;
    temp_path->clear();
    if (error == ENOENT || error == ENOTDIR) {
      return Error(fmt::format("{}: cannot create: the directory {} does not exist", Shown(path), Shown(dir)));
    }
    if (error == ENAMETOOLONG) return Error(OpenError(path, error));
    return Error(fmt::format("{}: cannot create: {}", Shown(path), Errno(error)));
  }
}

}  // namespace

int64_t MaxInputBytes() {
  int64_t set = g_max_input_bytes.load(std::memory_order_relaxed);
  if (set >= 0) return set;
  if (const char* env = std::getenv("XLENS_MAX_INPUT_SIZE"); env != nullptr && *env != '\0') {
    StatusOr<int64_t> parsed = ParseByteSize(env);
    if (parsed.ok()) return *parsed;
  }
  return kDefaultMaxInputBytes;
}

void SetMaxInputBytes(int64_t bytes) { g_max_input_bytes.store(bytes, std::memory_order_relaxed); }

StatusOr<int64_t> ParseByteSize(std::string_view text) {
  std::string_view rest = text;
  uint64_t value = 0;
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
    if (value > (uint64_t{1} << 62) / 10) {
      return Error(fmt::format("'{}' is too large a size", EscapeForTerminal(text)));
    }
    value = value * 10 + static_cast<uint64_t>(rest[digits] - '0');
    ++digits;
  }
  if (digits == 0) {
    return Error(fmt::format("'{}' is not a size (expected a number of bytes such as 512M or 2G)",
                             EscapeForTerminal(text)));
  }
  rest.remove_prefix(digits);
  int shift = 0;
  if (!rest.empty()) {
    switch (rest[0] | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      case 'b': shift = 0; break;
      default:
        return Error(fmt::format("'{}' is not a size (units are K, M, G, T)", EscapeForTerminal(text)));
    }
    if ((rest[0] | 0x20) != 'b') rest.remove_prefix(1);
    if (rest == "iB" || rest == "ib" || rest == "B" || rest == "b") rest = {};
    if (!rest.empty()) {
      return Error(fmt::format("'{}' is not a size (units are K, M, G, T)", EscapeForTerminal(text)));
    }
  }
  if (shift > 0 && value > (uint64_t{1} << (62 - shift))) {
    return Error(fmt::format("'{}' is too large a size", EscapeForTerminal(text)));
  }
  return static_cast<int64_t>(value << shift);
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  if (value == static_cast<double>(static_cast<int64_t>(value))) {
    return fmt::format("{} {}", static_cast<int64_t>(value), kUnits[unit]);
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

StatusOr<InputFile> InputFile::Open(const std::string& path, int64_t max_bytes) {
  return Open(path, max_bytes, /*follow=*/true);
}

StatusOr<InputFile> InputFile::OpenNoFollow(const std::string& path, int64_t max_bytes) {
  return Open(path, max_bytes, /*follow=*/false);
}

StatusOr<InputFile> InputFile::Open(const std::string& path, int64_t max_bytes, bool follow) {
  if (path.empty()) return Error("no file name given (an empty path)");
  // O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0 && !follow && errno == ELOOP) {
    return Error(fmt::format("{}: is a symbolic link, which is not followed here", Shown(path)));
  }
  if (fd < 0) return Error(OpenError(path, errno));
  InputFile file(fd, 0, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Error(fmt::format("{}: cannot stat: {}", Shown(path), Errno(errno)));
  if (S_ISDIR(st.st_mode)) return Error(fmt::format("{}: is a directory, expected a file", Shown(path)));
  if (!S_ISREG(st.st_mode)) {
    return Error(fmt::format("{}: is {}, not a regular file: xlens reads only regular files", Shown(path),
                             KindOfMode(st.st_mode)));
  }
  int64_t limit = Limit(max_bytes);
  if (st.st_size > limit) return Error(TooLarge(path, st.st_size, limit, true));
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file.size_ = st.st_size;
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(other.fd_), size_(other.size_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<size_t> InputFile::Read(char* data, size_t size) {
  for (;;) {
    ssize_t n = ::read(fd_, data, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    int error = errno;
    if (error == EISDIR) return Error(fmt::format("{}: is a directory, expected a file", Shown(path_)));
    return Error(fmt::format("{}: read failed: {}", Shown(path_), Errno(error)));
  }
}

Status InputFile::ReadAt(char* data, size_t size, int64_t offset) {
  size_t filled = 0;
  while (filled < size) {
    ssize_t n = ::pread(fd_, data + filled, size - filled, static_cast<off_t>(offset + filled));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(fmt::format("{}: read failed at byte {}: {}", Shown(path_), offset, Errno(errno)));
    if (n == 0) {
      return Error(fmt::format("{}: byte {}: expected {} more bytes, the file ends there",
                               Shown(path_), offset + static_cast<int64_t>(filled), size - filled));
    }
    filled += static_cast<size_t>(n);
  }
  return OkStatus();
}

namespace {

// The whole of `file`, opened with the limit `max_bytes`.
StatusOr<std::string> ReadWhole(InputFile& file, const std::string& path, int64_t max_bytes) {
  int64_t limit = Limit(max_bytes);
  std::string contents;
  contents.resize(static_cast<size_t>(file.size()));
  size_t filled = 0;
  for (;;) {
    if (filled == contents.size()) {
      // The file may be longer than fstat said (it grows, or it is a /proc file).
      if (static_cast<int64_t>(contents.size()) > limit) {
        return Error(TooLarge(path, static_cast<int64_t>(contents.size()), limit, false));
      }
      contents.resize(std::max<size_t>(4096, contents.size() * 2));
    }
    ASSIGN_OR_RETURN(size_t n, file.Read(contents.data() + filled, contents.size() - filled));
    if (n == 0) break;
    filled += n;
  }
  if (static_cast<int64_t>(filled) > limit) {
    return Error(TooLarge(path, static_cast<int64_t>(filled), limit, false));
  }
  contents.resize(filled);
  return contents;
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path, max_bytes));
  return ReadWhole(file, path, max_bytes);
}

StatusOr<std::string> ReadFileNoFollow(const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(InputFile file, InputFile::OpenNoFollow(path, max_bytes));
  return ReadWhole(file, path, max_bytes);
}

StatusOr<OutputFile> OutputFile::Create(const std::string& path) {
  if (path.empty()) return Error("no output file name given (an empty path)");
  OutputFile out;
  out.path_ = path;
  ASSIGN_OR_RETURN(out.target_path_, ResolveSymlinks(path));
  struct stat st;
  bool exists = ::stat(out.target_path_.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return Error(OpenError(path, errno));
  if (exists && S_ISDIR(st.st_mode)) {
    return Error(fmt::format("{}: is a directory, expected a file name to write", Shown(path)));
  }
  if (exists && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
      return Error(fmt::format("{}: is {}; xlens writes only regular files, character devices and FIFOs",
                               Shown(path), KindOfMode(st.st_mode)));
    }
    // Written through, never replaced. O_NONBLOCK so a FIFO nobody reads is refused, not waited on.
    int fd = ::open(out.target_path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENXIO) return Error(fmt::format("{}: is a FIFO that nobody is reading", Shown(path)));
      return Error(fmt::format("{}: cannot open for writing: {}", Shown(path), Errno(errno)));
    }
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    out.fd_ = fd;
    return out;
  }
  ASSIGN_OR_RETURN(out.fd_, CreateTemporary(path, out.target_path_, 0, 0666, &out.temp_path_));
  // Replacing a file keeps its permissions; a new one gets the umask's.
  if (exists) ::fchmod(out.fd_, st.st_mode & 07777);
  return out;
}

StatusOr<OutputFile> OutputFile::CreateNoFollow(const std::string& path) {
  if (path.empty()) return Error("no output file name given (an empty path)");
  OutputFile out;
  out.path_ = path;
  out.target_path_ = path;
  ASSIGN_OR_RETURN(out.fd_, CreateTemporary(path, path, O_NOFOLLOW, 0600, &out.temp_path_));
  return out;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : fd_(other.fd_),
      path_(std::move(other.path_)),
      target_path_(std::move(other.target_path_)),
      temp_path_(std::move(other.temp_path_)) {
  other.fd_ = -1;
  other.temp_path_.clear();
}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    Abandon();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    target_path_ = std::move(other.target_path_);
    temp_path_ = std::move(other.temp_path_);
    other.fd_ = -1;
    other.temp_path_.clear();
  }
  return *this;
}

OutputFile::~OutputFile() { Abandon(); }

void OutputFile::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

Status OutputFile::Write(std::string_view data) {
  if (fd_ < 0) return Error(fmt::format("{}: write after close", Shown(path_)));
  while (!data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(fmt::format("{}: write failed: {}", Shown(path_), Errno(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Status OutputFile::Commit() {
  if (fd_ < 0) return Error(fmt::format("{}: committed twice", Shown(path_)));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    std::string why = Errno(errno);
    Abandon();
    return Error(fmt::format("{}: write failed: {}", Shown(path_), why));
  }
  if (temp_path_.empty()) return OkStatus();
  if (::rename(temp_path_.c_str(), target_path_.c_str()) != 0) {
    std::string why = Errno(errno);
    Abandon();
    return Error(fmt::format("{}: cannot rename into place: {}", Shown(path_), why));
  }
  temp_path_.clear();
  return OkStatus();
}

Status WriteFile(const std::string& path, std::string_view contents) {
  ASSIGN_OR_RETURN(OutputFile out, OutputFile::Create(path));
  RETURN_IF_ERROR(out.Write(contents));
  return out.Commit();
}

bool IsTemporaryName(std::string_view name) {
  size_t at = name.rfind(".xlens-tmp.");
  if (at == std::string_view::npos) return false;
  std::string_view rest = name.substr(at + std::strlen(".xlens-tmp."));
  size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot + 1 == rest.size()) return false;
  for (char c : rest) {
    if (c != '.' && (c < '0' || c > '9')) return false;
  }
  return true;
}

int RemoveStaleTemporaries(const std::string& directory) {
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (struct dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (!IsTemporaryName(name)) continue;
    std::string_view rest = name.substr(name.rfind(".xlens-tmp.") + std::strlen(".xlens-tmp."));
    long pid = std::strtol(std::string(rest.substr(0, rest.find('.'))).c_str(), nullptr, 10);
    if (pid <= 0) continue;
    // A live writer (this process included) still owns its temporary.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::string full = directory + "/" + std::string(name);
    if (::unlink(full.c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

PathKind GetPathKind(const std::string& path, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    if (e == ENOENT) return PathKind::kMissing;
    if (error != nullptr) *error = OpenError(path, e);
    return e == ELOOP ? PathKind::kSymlinkLoop : PathKind::kError;
  }
  if (S_ISREG(st.st_mode)) return PathKind::kRegular;
  if (S_ISDIR(st.st_mode)) return PathKind::kDirectory;
  if (error != nullptr) *error = fmt::format("{}: is {}", Shown(path), KindOfMode(st.st_mode));
  return PathKind::kOther;
}

Status CreateDirectories(const std::string& directory) {
  if (directory.empty()) return Error("no directory name given (an empty path)");
  std::string error;
  switch (GetPathKind(directory, &error)) {
    case PathKind::kDirectory: return OkStatus();
    case PathKind::kMissing: break;
    case PathKind::kRegular: return Error(fmt::format("{}: is a file, expected a directory", Shown(directory)));
    case PathKind::kError: break;  // e.g. a component is a file: create_directories says which
    default: return Error(error + ", expected a directory");
  }
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return Error(fmt::format("{}: cannot create the directory: {}", Shown(directory), ec.message()));
  if (GetPathKind(directory, &error) != PathKind::kDirectory) {
    return Error(fmt::format("{}: cannot create the directory", Shown(directory)));
  }
  return OkStatus();
}

}  // namespace xlens
