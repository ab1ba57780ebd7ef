// Every file xlens reads or writes goes through here, so the rules hold everywhere at once:
//
// Reading: only regular files are read (a directory, FIFO, device or socket is refused before
// anything blocks), and only up to a size limit stated in the message and overridable
// (--max-input-size, XLENS_MAX_INPUT_SIZE). Nothing throws; every error names the path.
//
// Writing: a regular file (or a path that does not exist yet) is written to a temporary file in
// the same directory and renamed over it, so a crash never leaves a half file and readers never
// see one. A symlink is resolved first, so its target is replaced and the link kept. A special
// file (character device, FIFO) is written through, never replaced: `-o /dev/null` stays the
// system's /dev/null. A directory is refused. The directory's permissions decide the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

// The largest file a reader accepts unless told otherwise: 2 GiB.
inline constexpr int64_t kDefaultMaxInputBytes = int64_t{2} << 30;

// The limit in force: SetMaxInputBytes's, else XLENS_MAX_INPUT_SIZE's, else the default.
int64_t MaxInputBytes();
// Overrides the limit for this process (the command line's --max-input-size).
void SetMaxInputBytes(int64_t bytes);
// "1000", "64K", "512M", "2G", "1T" (powers of 1024; a trailing "B"/"iB" is allowed).
StatusOr<int64_t> ParseByteSize(std::string_view text);
// 1536 -> "1.5 KiB": sizes in messages.
std::string FormatBytes(int64_t bytes);

// Reads the whole of a regular file of at most `max_bytes` (-1: MaxInputBytes()).
StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes = -1);
// As ReadFile, for a name in a directory the caller has checked (a cache's entry): a symbolic
// link at `path` is refused, never followed (InputFile::OpenNoFollow).
StatusOr<std::string> ReadFileNoFollow(const std::string& path, int64_t max_bytes = -1);

// A regular file opened for reading in pieces (streaming readers), with the same checks as
// ReadFile. Move-only; closes on destruction.
class InputFile {
 public:
  static StatusOr<InputFile> Open(const std::string& path, int64_t max_bytes = -1);
  // As Open, for a name in a directory the caller has checked (a cache): a symbolic link at
  // `path` is refused, never followed.
  static StatusOr<InputFile> OpenNoFollow(const std::string& path, int64_t max_bytes = -1);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  // Reads up to `size` bytes; 0 at end of file. The error names the path.
  StatusOr<size_t> Read(char* data, size_t size);
  // Reads exactly `size` bytes at `offset` (random access: checkpoint shards); a file that ends
  // before offset + size is an error naming the path, the offset and how much was there.
  Status ReadAt(char* data, size_t size, int64_t offset);
  int fd() const { return fd_; }
  // The size when opened.
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  InputFile(int fd, int64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  static StatusOr<InputFile> Open(const std::string& path, int64_t max_bytes, bool follow);
  int fd_ = -1;
  int64_t size_ = 0;
  std::string path_;
};

// A file being written under the rules above. Write pieces, then Commit(); destroying it
// without a commit removes the temporary and leaves the old file as it was.
class OutputFile {
 public:
  static StatusOr<OutputFile> Create(const std::string& path);
  // For a name in a directory the caller has checked (a cache), other rules: the temporary is
  // created beside `path` with O_EXCL|O_NOFOLLOW, mode 0600, and Commit() renames it over
  // `path` itself, so whatever is there (a symbolic link, dangling or not, a FIFO) is replaced,
  // never written through, and nothing outside that directory is touched.
  static StatusOr<OutputFile> CreateNoFollow(const std::string& path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  Status Write(std::string_view data);
  // The descriptor to write to directly (e.g. for zlib's gzdopen, which then owns a dup of it).
  int fd() const { return fd_; }
  // Closes and, for a regular file, renames the temporary over the target.
  Status Commit();
  // True when the target is a special file written through (no temporary, no rename).
  bool writes_through() const { return temp_path_.empty(); }
  // The path the user gave.
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void Abandon();
  int fd_ = -1;
  std::string path_;         // as given
  std::string target_path_;  // symlinks resolved
  std::string temp_path_;    // empty when written through
};

// Writes `contents` to `path` under the rules above.
Status WriteFile(const std::string& path, std::string_view contents);
// The former name; same rules.
inline Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  return WriteFile(path, contents);
}

// True for a name that OutputFile uses for its temporaries ("NAME.xlens-tmp.PID.N").
bool IsTemporaryName(std::string_view file_name);
// Removes, from `directory` (not recursively), the temporaries of writers that died before
// committing: those whose process no longer exists. Returns how many it removed.
int RemoveStaleTemporaries(const std::string& directory);

// What is at a path, without following it into an exception.
enum class PathKind { kMissing, kRegular, kDirectory, kSymlinkLoop, kOther, kError };
// `error` (optional) receives the reason for kError/kSymlinkLoop/kOther ("a FIFO", ...).
PathKind GetPathKind(const std::string& path, std::string* error = nullptr);
// Creates `directory` and its parents; the error names which part could not be made and why.
Status CreateDirectories(const std::string& directory);

}  // namespace xlens
