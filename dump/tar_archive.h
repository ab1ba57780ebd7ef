// .tar.gz files through libarchive, the only place xlens writes or reads archives (bug bundles).
// Without libarchive at build time (Debian's libarchive-dev) every function says so in its error.
//
// Writing: regular members only, mode 0644, owner 0, a fixed time, POSIX pax format, gzip: the
// same members give the same bytes. TarGzWriter streams: members go in piece by piece and the
// compressed bytes come out as they are made, so neither is ever held whole.
//
// Reading treats the file as hostile: only gzip-compressed (or uncompressed) tar is accepted, a
// member's data is read only when it is a regular file and is handed on piece by piece (never
// held whole), and the bytes read are bounded twice: before a member's data is read, by the size
// its header claims, and as they arrive, counted rather than trusted from the headers. The bound
// is `max_total_bytes`, and, past `ratio_free_bytes`, `max_ratio` times the archive's own size: a
// compression bomb is refused after at most that many bytes, never expanded. Damage (truncation,
// a bad checksum, not a tar at all) is one error naming the file and the member it was reading.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

// Whether this build can write and read .tar.gz.
bool HaveTarGz();

struct TarMember {
  std::string name;
  std::string contents;
};

// The bytes of a .tar.gz holding `members`, in order.
StatusOr<std::string> WriteTarGz(const std::vector<TarMember>& members);

// Writes a .tar.gz member by member; `out` is given the compressed bytes in order as they are
// made, and an error it returns ends the writing (the call that caused it returns that error).
class TarGzWriter {
 public:
  using Output = std::function<Status(std::string_view)>;
  static StatusOr<std::unique_ptr<TarGzWriter>> Open(Output out);
  ~TarGzWriter();
  TarGzWriter(const TarGzWriter&) = delete;
  TarGzWriter& operator=(const TarGzWriter&) = delete;

  // Starts a regular member of `size` bytes, which Write then takes in any number of pieces;
  // what is not written by the next Begin or Close is zeros, what goes past `size` is an error.
  Status Begin(const std::string& name, int64_t size);
  Status Write(std::string_view data);
  // Ends the archive (the last member's padding, gzip's trailer).
  Status Close();

  struct State;  // libarchive's handle and what the output callback needs

 private:
  explicit TarGzWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// What a member is, from its header.
enum class TarMemberKind { kRegular, kDirectory, kSymlink, kHardlink, kDevice, kFifo, kOther };
// "a symbolic link", "a character or block device", ...: for messages.
std::string_view TarMemberKindName(TarMemberKind kind);

struct TarHeader {
  std::string name;  // as stored, not normalized
  TarMemberKind kind = TarMemberKind::kOther;
  std::string link_target;  // of a symlink or hardlink
  int64_t size = 0;         // as the header claims
};

struct TarReadLimits {
  int64_t max_total_bytes = 0;  // of all members' data together
  int64_t max_members = 100000;
  // Data bytes per byte of the archive, counted once the data passes `ratio_free_bytes`; 0: no
  // limit on the ratio. Text compresses 5-20 times; 1000 is zeros.
  double max_ratio = 0;
  int64_t ratio_free_bytes = 0;
};

// Where one member's data goes, in order, piece by piece.
class TarMemberSink {
 public:
  virtual ~TarMemberSink() = default;
  virtual Status Write(std::string_view data) = 0;
  // After the last piece.
  virtual Status Close() = 0;
};

// Reads the archive at `path` member by member: `check(header)` may refuse a member (its error
// ends the reading); then, for a regular file, `open(header)` gives the sink its data goes to.
Status ReadTarGz(const std::string& path, const TarReadLimits& limits,
                 const std::function<Status(const TarHeader&)>& check,
                 const std::function<StatusOr<std::unique_ptr<TarMemberSink>>(const TarHeader&)>& open);

}  // namespace xlens
