#include "compiler/codegen/cpu/object_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/SHA256.h>

#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/private_directory.h"
#include "compiler/support/terminal_text.h"

namespace xlens::codegen {
namespace {

// Bump when the optimization pipeline (cpu_jit.cc's RunPipeline) changes: old entries then
// simply miss. The layout of an entry has its own version (kVersion) in the entry.
constexpr std::string_view kFormat = "xlens object cache 3";  // 3: interleaved groups of up to 16
constexpr std::string_view kMagic = "XLENSOBJ";
// 1: magic, length, SHA-256. 2: the entry's key after the checksum. An entry of another
// version is a miss, rewritten in place.
constexpr uint32_t kVersion = 2;
// Bytes of objects kept in memory at most; past it, the memory cache starts over.
constexpr int64_t kMemoryLimitBytes = int64_t{256} << 20;
constexpr int64_t kDefaultMaxEntryBytes = int64_t{1} << 30;
// A key is 64 hex digits; anything much longer is not one of ours.
constexpr uint32_t kMaxKeyBytes = 256;
// magic, version (u32), key length (u32), payload length (u64), SHA-256 of the payload; then
// the key, then the payload.
constexpr size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 32;

std::atomic<int64_t> g_max_entry_bytes{-1};

std::string Sha256(std::string_view data) {
  llvm::SHA256 sha;
  sha.update(llvm::StringRef(data.data(), data.size()));
  const auto digest = sha.final();
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

template <typename T>
void Append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
T Load(const char* data) {
  T value;
  std::memcpy(&value, data, sizeof(value));
  return value;
}

std::string EncodeEntry(const std::string& key, const std::string& object) {
  std::string entry(kMagic);
  Append<uint32_t>(entry, kVersion);
  Append<uint32_t>(entry, static_cast<uint32_t>(key.size()));
  Append<uint64_t>(entry, object.size());
  entry += Sha256(object);
  entry += key;
  entry += object;
  return entry;
}

// Reads exactly `size` bytes unless the file ends first; the count read.
StatusOr<size_t> ReadUpTo(InputFile& file, char* data, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    ASSIGN_OR_RETURN(size_t n, file.Read(data + filled, size - filled));
    if (n == 0) break;
    filled += n;
  }
  return filled;
}

enum class Found { kMissing, kUnreadable, kInvalid, kValid };

// The entry of `key` at `path`: its object, or why there is none. The header is checked before
// the payload is read, and the size before the header, so a foreign, garbage or huge (sparse)
// file costs a few bytes of reading, not its length.
Found ReadEntry(const std::string& path, const std::string& key, std::string* object,
                std::string* why) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return Found::kMissing;
  StatusOr<InputFile> file = InputFile::OpenNoFollow(path, std::numeric_limits<int64_t>::max());
  if (!file.ok()) {
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return Found::kMissing;
    *why = file.status().message();
    return Found::kUnreadable;
  }
  const int64_t size = file->size();
  const int64_t limit = ObjectCache::MaxEntryBytes();
  if (size > limit) {
    *why = fmt::format("{} is more than the {} limit on cache entries", FormatBytes(size),
                       FormatBytes(limit));
    return Found::kInvalid;
  }
  char header[kFixedHeaderBytes];
  StatusOr<size_t> got = ReadUpTo(*file, header, sizeof(header));
  if (!got.ok()) {
    *why = got.status().message();
    return Found::kUnreadable;
  }
  if (*got < sizeof(header) || std::memcmp(header, kMagic.data(), kMagic.size()) != 0) {
    *why = *got < sizeof(header) ? "truncated header" : "not a cache entry";
    return Found::kInvalid;
  }
  const uint32_t version = Load<uint32_t>(header + 8);
  const uint32_t key_bytes = Load<uint32_t>(header + 12);
  const uint64_t length = Load<uint64_t>(header + 16);
  if (version != kVersion) {
    *why = fmt::format("an entry of format version {}, expected {}", version, kVersion);
    return Found::kInvalid;
  }
  if (key_bytes > kMaxKeyBytes) {
    *why = fmt::format("a key of {} bytes", key_bytes);
    return Found::kInvalid;
  }
  std::string stored_key(key_bytes, '\0');
  got = ReadUpTo(*file, stored_key.data(), stored_key.size());
  if (!got.ok()) {
    *why = got.status().message();
    return Found::kUnreadable;
  }
  if (*got < key_bytes) {
    *why = "truncated header";
    return Found::kInvalid;
  }
  if (stored_key != key) {
    *why = fmt::format("it holds the code of another key, {}", EscapeForTerminal(stored_key));
    return Found::kInvalid;
  }
  const uint64_t available = static_cast<uint64_t>(size) - kFixedHeaderBytes - key_bytes;
  if (length != available) {
    *why = fmt::format("holds {} bytes of code, its header says {}", available, length);
    return Found::kInvalid;
  }
  object->assign(static_cast<size_t>(length), '\0');
  got = ReadUpTo(*file, object->data(), object->size());
  if (!got.ok()) {
    *why = got.status().message();
    return Found::kUnreadable;
  }
  if (*got < length) {
    *why = fmt::format("holds {} bytes of code, its header says {}", *got, length);
    return Found::kInvalid;
  }
  if (Sha256(*object) != std::string_view(header + 24, 32)) {
    *why = "checksum mismatch";
    return Found::kInvalid;
  }
  return Found::kValid;
}

}  // namespace

ObjectCache& ObjectCache::Global() {
  static ObjectCache* cache = new ObjectCache();
  return *cache;
}

std::string ObjectCache::Key(std::string_view bitcode, int opt_level, std::string_view triple,
                             std::string_view cpu, std::string_view features) {
  llvm::SHA256 sha;
  for (std::string_view part : {kFormat, std::string_view(LLVM_VERSION_STRING), triple, cpu,
                                features}) {
    sha.update(llvm::StringRef(part.data(), part.size()));
    sha.update(llvm::StringRef("\0", 1));
  }
  sha.update(llvm::StringRef(fmt::format("O{}", opt_level)));
  sha.update(llvm::StringRef(bitcode.data(), bitcode.size()));
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

std::string ObjectCache::EntryPath(const std::string& dir, const std::string& key) {
  return fmt::format("{}/{}.xlensobj", dir, key);
}

int64_t ObjectCache::MaxEntryBytes() {
  const int64_t set = g_max_entry_bytes.load(std::memory_order_relaxed);
  return set >= 0 ? set : std::min(kDefaultMaxEntryBytes, MaxInputBytes());
}

void ObjectCache::SetMaxEntryBytes(int64_t bytes) {
  g_max_entry_bytes.store(bytes, std::memory_order_relaxed);
}

std::optional<std::string> ObjectCache::Lookup(const std::string& key, const std::string& dir,
                                               std::string* warning) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  }
  if (dir.empty() || !UsableCacheDirectory(dir, /*create=*/false, warning)) return std::nullopt;
  const std::string path = EntryPath(dir, key);
  std::string object, why;
  ActivityScope activity("loading compile cache entry " + path);
  switch (ReadEntry(path, key, &object, &why)) {
    case Found::kMissing: return std::nullopt;  // not cached yet
    case Found::kUnreadable:
      *warning = fmt::format("persistent cache entry {} cannot be read ({}); recompiling",
                             DisplayPath(path), why);
      return std::nullopt;
    case Found::kInvalid:
      *warning = fmt::format("persistent cache entry {} is corrupt ({}); recompiling",
                             DisplayPath(path), why);
      return std::nullopt;
    case Found::kValid: break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  memory_[key] = object;
  memory_bytes_ += static_cast<int64_t>(object.size());
  return object;
}

void ObjectCache::Insert(const std::string& key, const std::string& object, const std::string& dir,
                         std::string* warning) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (memory_bytes_ + static_cast<int64_t>(object.size()) > kMemoryLimitBytes) {
      memory_.clear();
      memory_bytes_ = 0;
    }
    if (memory_.emplace(key, object).second) memory_bytes_ += static_cast<int64_t>(object.size());
  }
  if (dir.empty() || !UsableCacheDirectory(dir, /*create=*/true, warning)) return;
  const std::string entry = EncodeEntry(key, object);
  // An entry that would be refused when read is not worth writing.
  if (static_cast<int64_t>(entry.size()) > MaxEntryBytes()) return;
  const std::string path = EntryPath(dir, key);
  StatusOr<OutputFile> file = OutputFile::CreateNoFollow(path);
  Status written = file.ok() ? file->Write(entry) : file.status();
  if (written.ok()) written = file->Commit();
  if (!written.ok()) {
    *warning = fmt::format("cannot write persistent cache entry {}: {}", DisplayPath(path),
                           written.message());
  }
}

void ObjectCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
  memory_bytes_ = 0;
  ForgetReportedCacheDirectories();
}

}  // namespace xlens::codegen
