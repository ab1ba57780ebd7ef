// The persistent cache's kernel choices, one file per machine and key (DIR/HASH.xlenschoice beside
// the object cache's entries, so processes never rewrite each other's files), and the machine a
// choice holds for. Each entry is one document of one record in the format of
// dump/kernel_choices.h, which also reads a module's dump of its choices and the files the flags
// name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dump/kernel_choices.h"

namespace xlens::runtime {

// The largest cache entry read (one choice).
inline constexpr int64_t kMaxCacheEntryBytes = 64 << 10;

// The machine a timing holds for: the CPU LLVM names, a digest of its features, and the number
// of hardware threads (the pool's size, in the key, is one of the caller's).
const std::string& MachineForKernelChoices();

// The persistent cache's entry for (machine, key) in `dir`: its record, or nothing when there is
// none. An entry that cannot be read, is not one document of one record, or holds another
// machine's or key's record is not returned; why goes into `warning`.
std::string KernelChoiceCachePath(const std::string& dir, const std::string& machine, const std::string& key);
std::optional<KernelChoiceRecord> LookupKernelChoice(const std::string& dir, const std::string& machine,
                                                     const std::string& key, std::string* warning);
// Writes `record` as its entry in `dir` (created 0700 when missing; a directory that is not
// private is refused, as the object cache refuses it), atomically. A failure goes into `warning`.
void StoreKernelChoice(const std::string& dir, const KernelChoiceRecord& record, std::string* warning);

}  // namespace xlens::runtime
