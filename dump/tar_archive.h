// .tar.gz files through libarchive, the only place xlens writes or reads archives (bug bundles).
// Without libarchive at build time (Debian's libarchive-dev) every function says so in its error.
//
// Writing: regular members only, mode 0644, owner 0, a fixed time, POSIX pax format, gzip: the
// same members give the same bytes.
//
// Reading treats the file as hostile: only gzip-compressed (or uncompressed) tar is accepted, a
// member's data is read only when it is a regular file, and the bytes read, counted as they
// arrive rather than trusted from the headers, stop at `max_total_bytes` (a compression bomb is
// refused after that many bytes, never expanded). Damage (truncation, a bad checksum, not a tar
// at all) is one error naming the file and the member it was reading.
#pragma once

#include <cstdint>
#include <functional>
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
};

// Reads the archive at `path` member by member: `check(header)` may refuse a member (its error
// ends the reading); then, for a regular file, `take(header, contents)` gets its data.
Status ReadTarGz(const std::string& path, const TarReadLimits& limits,
                 const std::function<Status(const TarHeader&)>& check,
                 const std::function<Status(const TarHeader&, std::string contents)>& take);

}  // namespace xlens
