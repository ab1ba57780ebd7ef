// ObjectCache: machine code of compiled kernel partitions, by a key that covers everything that
// decides it (the partition's LLVM IR, which is a function of the HLO module and of every flag
// that changes code generation; the optimization level; the CPU, its features and the target
// triple; LLVM's version; the cache format, bumped whenever the optimization pipeline changes).
// Entries live in memory for the process and, with --xla_xlens_persistent_cache_dir=DIR (in the
// spirit of JAX's persistent compilation cache), in DIR as one file per key, written atomically.
// A file is checked (magic, length, SHA-256 of the contents) before use: a truncated or
// garbage entry is reported, ignored and rewritten by the recompilation, never loaded.
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

  // The object for `key` from memory, else from `dir` (when not empty). An entry that cannot
  // be read or fails its checks is not returned; why goes into `warning`.
  std::optional<std::string> Lookup(const std::string& key, const std::string& dir,
                                    std::string* warning);
  // Keeps `object` in memory and, when `dir` is not empty, writes it there; a failed write is
  // reported in `warning` (the compilation itself has succeeded).
  void Insert(const std::string& key, const std::string& object, const std::string& dir,
              std::string* warning);
  // Forgets the entries held in memory (the directory is left as it is).
  void Clear();

 private:
  std::mutex mu_;
  std::map<std::string, std::string> memory_;
  int64_t memory_bytes_ = 0;
};

}  // namespace xlens::codegen
