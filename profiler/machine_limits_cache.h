// This machine's limits kept across processes. Measuring them takes a second or two and a few
// hundred MB of scratch arrays, which every `--xla_hlo_profile` run would otherwise pay; the
// limits change only with the machine. The file is a cache and is read as a hostile input:
// anything wrong with it (unreadable, not JSON, a number out of range, another machine's figures)
// is a reason to measure again and write it anew, never an error of the user's command.
//
// Where: XLENS_MACHINE_LIMITS_CACHE (a file; "off" keeps nothing), else
// $XDG_CACHE_HOME/xlens/machine_limits.json, else ~/.cache/xlens/machine_limits.json, in a
// directory only this user can write to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/support/status.h"
#include "profiler/machine_limits.h"

namespace xlens::profiler {

// What identifies the machine the limits belong to: the CPU model, the online CPUs, the widest
// vector unit and the data caches. A home directory shared by several machines keeps the figures
// of whichever measured last; another machine's are measured again.
std::string MachineFingerprint();

// The cache file in force (see above); "" when the cache is off or there is no home.
std::string MachineLimitsCachePath();

// The file's text for `limits` measured at `measured_unix_seconds` on the machine `fingerprint`.
std::string MachineLimitsToJson(const MachineLimits& limits, std::string_view fingerprint,
                                int64_t measured_unix_seconds);

// Limits read back from MachineLimitsToJson's text; an error says what is wrong (not JSON, a
// field missing or out of range, another machine's). `measured_unix_seconds` may be null.
StatusOr<MachineLimits> MachineLimitsFromJson(std::string_view text, std::string_view fingerprint,
                                              int64_t* measured_unix_seconds);

// The kept limits of this machine at `path`, or an error naming the path and why they cannot be
// used (missing, a link, not in a private directory, invalid).
StatusOr<MachineLimits> ReadKeptMachineLimits(const std::string& path, std::string_view fingerprint,
                                              int64_t* measured_unix_seconds);
// Writes them atomically, creating the private directory; the error names the path.
Status KeepMachineLimits(const std::string& path, const MachineLimits& limits,
                         std::string_view fingerprint, int64_t measured_unix_seconds);

// This machine's limits for the process: the kept ones when the cache holds this machine's, else
// a short measurement (each cache level at half its capacity, twice the last level, memory, the
// FMA peak: a second or two), which is then kept. A damaged or unsafe cache file gets one warning
// line on stderr and is measured over. What --xla_hlo_profile holds its rows to.
const MachineLimits& ThisMachineLimits();

}  // namespace xlens::profiler
