#include "compiler/codegen/cpu/object_cache.h"

#include <sys/stat.h>

#include <cstring>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/SHA256.h>

#include "compiler/support/file_io.h"

namespace xlens::codegen {
namespace {

// Bump when the optimization pipeline (cpu_jit.cc's RunPipeline) or the entry format changes:
// old entries then simply miss.
constexpr std::string_view kFormat = "xlens object cache 1";
constexpr std::string_view kMagic = "XLENSOBJ";
// Bytes of objects kept in memory at most; past it, the memory cache starts over.
constexpr int64_t kMemoryLimitBytes = int64_t{256} << 20;
constexpr size_t kHeaderBytes = 8 + 8 + 32;  // magic, payload length, SHA-256 of the payload

std::string Sha256(std::string_view data) {
  llvm::SHA256 sha;
  sha.update(llvm::StringRef(data.data(), data.size()));
  const auto digest = sha.final();
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

std::string EncodeEntry(const std::string& object) {
  std::string entry(kMagic);
  const uint64_t length = object.size();
  entry.append(reinterpret_cast<const char*>(&length), sizeof(length));
  entry += Sha256(object);
  entry += object;
  return entry;
}

// The object inside a file's contents, or why the file is not a valid entry.
std::optional<std::string> DecodeEntry(const std::string& entry, std::string* why) {
  if (entry.size() < kHeaderBytes || entry.compare(0, kMagic.size(), kMagic) != 0) {
    *why = entry.size() < kHeaderBytes ? "truncated header" : "not a cache entry";
    return std::nullopt;
  }
  uint64_t length = 0;
  std::memcpy(&length, entry.data() + 8, sizeof(length));
  if (length != entry.size() - kHeaderBytes) {
    *why = fmt::format("holds {} bytes of code, its header says {}", entry.size() - kHeaderBytes,
                       length);
    return std::nullopt;
  }
  std::string object = entry.substr(kHeaderBytes);
  if (Sha256(object) != entry.substr(16, 32)) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return object;
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

std::optional<std::string> ObjectCache::Lookup(const std::string& key, const std::string& dir,
                                               std::string* warning) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  }
  if (dir.empty()) return std::nullopt;
  const std::string path = EntryPath(dir, key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // not cached yet
  StatusOr<std::string> entry = ReadFile(path);
  if (!entry.ok()) {
    *warning = fmt::format("persistent cache entry {} cannot be read ({}); recompiling", path,
                           entry.status().message());
    return std::nullopt;
  }
  std::string why;
  std::optional<std::string> object = DecodeEntry(*entry, &why);
  if (!object) {
    *warning = fmt::format("persistent cache entry {} is corrupt ({}); recompiling", path, why);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  memory_[key] = *object;
  memory_bytes_ += static_cast<int64_t>(object->size());
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
  if (dir.empty()) return;
  ::mkdir(dir.c_str(), 0755);  // an existing directory is fine; a failure shows in the write
  const std::string path = EntryPath(dir, key);
  StatusOr<OutputFile> file = OutputFile::Create(path);
  Status written = file.ok() ? file->Write(EncodeEntry(object)) : file.status();
  if (written.ok()) written = file->Commit();
  if (!written.ok()) {
    *warning = fmt::format("cannot write persistent cache entry {}: {}", path, written.message());
  }
}

void ObjectCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
  memory_bytes_ = 0;
}

}  // namespace xlens::codegen
