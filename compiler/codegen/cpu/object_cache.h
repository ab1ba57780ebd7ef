// ObjectCache: machine code of compiled kernel partitions, by a key that covers everything that
// decides it (the partition's LLVM IR, which is a function of the HLO module and of every flag
// that changes code generation; the optimization level; the CPU, its features and the target
// triple; LLVM's version; the cache format, bumped whenever the optimization pipeline changes).
// Entries live in memory for the process and, with --xla_xlens_persistent_cache_dir=DIR (in the
// spirit of JAX's persistent compilation cache), in DIR as one file per key.
//
// What is in DIR is run as code, so DIR is trusted only as far as it is private: it is created
// 0700 when missing, and a directory that is not ours or that its group or others can write is
// not used (one warning; compilation goes on without it). Entries are opened without following a
// symbolic link at their name and written to an O_EXCL temporary in DIR renamed over the name,
// so a link planted there is replaced, never written through. Each entry carries a format
// version, its own key and the SHA-256 of its code, and is used only when all three match and
// its size is within MaxEntryBytes(), checked before anything is read: a truncated, garbage,
// oversized or foreign entry (another key's valid code copied under this name) is reported,
// ignored and rewritten by the recompilation, never loaded. The cache is an optimization: none
// of this ever fails a compilation.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace xlens::codegen {

class ObjectCache {
 public:
  // The process-wide cache.
  static ObjectCache& Global();

  // The hex SHA-256 key of a partition compiled for a target.
  static std::string Key(std::string_view bitcode, int opt_level, std::string_view triple,
                         std::string_view cpu, std::string_view features);
  // The file of `key` in `dir`.
  static std::string EntryPath(const std::string& dir, const std::string& key);

  // The largest entry file read: SetMaxEntryBytes's, else the smaller of 1 GiB and the limit on
  // input files (--max-input-size, XLENS_MAX_INPUT_SIZE). Larger code is not written either.
  static int64_t MaxEntryBytes();
  // Overrides the limit for this process (-1: back to the default).
  static void SetMaxEntryBytes(int64_t bytes);

  // The object for `key` from memory, else from `dir` (when not empty). An entry that cannot
  // be read or fails its checks is not returned; why goes into `warning`.
  std::optional<std::string> Lookup(const std::string& key, const std::string& dir,
                                    std::string* warning);
  // Keeps `object` in memory and, when `dir` is not empty, writes it there; a failed write is
  // reported in `warning` (the compilation itself has succeeded).
  void Insert(const std::string& key, const std::string& object, const std::string& dir,
              std::string* warning);
  // Forgets the entries held in memory (the directory is left as it is) and which refused
  // directories were already reported.
  void Clear();

 private:

  std::mutex mu_;
  std::map<std::string, std::string> memory_;
  int64_t memory_bytes_ = 0;
};

}  // namespace xlens::codegen
