// Reads a bug bundle (bug_bundle.h) that someone else made: it is hostile input. Every member is
// checked before anything is written, and only into a new private directory:
//   - names must be relative, without `..` or `.` components, backslashes or control characters,
//     and each at most once (a second member of one name is refused, not merged);
//   - only regular files and directories: symbolic links, hard links, devices and FIFOs are
//     refused, as are members with the same name as a directory made for another;
//   - at most kMaxBundleMembers members, refused at the first one past it;
//   - the data, checked against each member's header before it is expanded and counted as it
//     expands, stops at the input size limit (MaxInputBytes(): --max-input-size,
//     XLENS_MAX_INPUT_SIZE) and, under the default limit, past kBundleExpansionFreeBytes at
//     kMaxBundleExpansion times the bundle's size, so a compression bomb is refused early;
//   - members are written to their files as they expand, never held whole in memory;
//   - manifest.json and environment.json, which are parsed whole (a JSON tree costs several times
//     its text), at most kMaxBundleJsonBytes under the default limit, refused by their headers:
//     a few MB of bundle listing 200k modules would otherwise expand to a tree past the memory;
//   - a damaged or truncated archive is one message naming the bundle and where it broke.
// Files are created with O_EXCL|O_NOFOLLOW below the private directory, which this reader made
// (mode 0700) and into which nothing else writes.
#pragma once

#include <string>
#include <vector>

#include "compiler/support/status.h"
#include "compiler/support/temporary_directory.h"
#include "dump/manifest.h"
#include "dump/tar_archive.h"

namespace xlens {

inline constexpr int64_t kMaxBundleMembers = 100000;
inline constexpr double kMaxBundleExpansion = 100;
inline constexpr int64_t kBundleExpansionFreeBytes = int64_t{256} << 20;
// The JSON members' text (a real dump's manifest is some KiB a module).
inline constexpr int64_t kMaxBundleJsonBytes = int64_t{64} << 20;

struct UnpackedBundle {
  TemporaryDirectory directory;
  Manifest manifest;
  std::vector<std::string> files;  // member names, in archive order
  bool strip_constants = false;    // environment.json says the constants were elided
  // environment.json's "xlens" and "host" entries, as key and value.
  std::vector<std::pair<std::string, std::string>> recorded_host;
};

// The limits above, as the archive reader takes them.
TarReadLimits BundleReadLimits();

// The most a JSON member (manifest.json, environment.json) may hold: kMaxBundleJsonBytes, or the
// input limit where the user chose one.
int64_t MaxBundleJsonBytes();

// Why a member name is refused, or empty when it is acceptable.
std::string CheckBundleMemberName(const std::string& name);

// Unpacks `path` into a new private directory under `parent` and reads its manifest. Errors
// start with the bundle's path.
StatusOr<UnpackedBundle> UnpackBundle(const std::string& path, const std::string& parent = "");

}  // namespace xlens
