#include "compiler/runtime/kernel_choice_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/support/file_io.h"
#include "compiler/support/private_directory.h"
#include "compiler/support/terminal_text.h"

namespace xlens::runtime {
namespace {

constexpr std::string_view kEntrySuffix = ".xlenschoice";

std::string Sha256Hex(std::string_view text) {
  llvm::SHA256 sha;
  sha.update(llvm::StringRef(text.data(), text.size()));
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

}  // namespace

const std::string& MachineForKernelChoices() {
  static const std::string* machine = [] {
    std::vector<std::string> features;
    for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
      if (feature.getValue()) features.push_back(feature.getKey().str());
    }
    std::sort(features.begin(), features.end());
    return new std::string(fmt::format("{}, features {}, {} hardware threads", llvm::sys::getHostCPUName().str(),
                                       Sha256Hex(fmt::format("{}", fmt::join(features, ","))).substr(0, 16),
                                       std::thread::hardware_concurrency()));
  }();
  return *machine;
}

std::string KernelChoiceCachePath(const std::string& dir, const std::string& machine, const std::string& key) {
  return fmt::format("{}/{}{}", dir, Sha256Hex(machine + std::string(1, '\0') + key), kEntrySuffix);
}

std::optional<KernelChoiceRecord> LookupKernelChoice(const std::string& dir, const std::string& machine,
                                                     const std::string& key, std::string* warning) {
  if (!UsableCacheDirectory(dir, /*create=*/false, warning)) return std::nullopt;  // refused, or not made yet
  const std::string path = KernelChoiceCachePath(dir, machine, key);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;  // not timed yet
  auto reject = [&](const std::string& why) -> std::optional<KernelChoiceRecord> {
    *warning = fmt::format("kernel choice cache entry {} is rejected ({}); timing again", DisplayPath(path), why);
    return std::nullopt;
  };
  StatusOr<std::string> text = ReadFileNoFollow(path, kMaxCacheEntryBytes);
  if (!text.ok()) return reject(text.status().message());
  StatusOr<std::vector<KernelChoiceRecord>> records = ParseKernelChoices(*text, "it");
  if (!records.ok()) return reject(records.status().message());
  if (records->size() != 1) return reject(fmt::format("{} choices where an entry holds one", records->size()));
  if ((*records)[0].machine != machine || (*records)[0].key != key) {
    return reject("it holds another machine's or shape's choice");
  }
  return std::move((*records)[0]);
}

void StoreKernelChoice(const std::string& dir, const KernelChoiceRecord& record, std::string* warning) {
  if (!UsableCacheDirectory(dir, /*create=*/true, warning)) return;
  const std::string path = KernelChoiceCachePath(dir, record.machine, record.key);
  StatusOr<OutputFile> file = OutputFile::CreateNoFollow(path);
  Status written = file.ok() ? file->Write(SerializeKernelChoices({record})) : file.status();
  if (written.ok()) written = file->Commit();
  if (!written.ok()) {
    *warning = fmt::format("cannot write kernel choice cache entry {}: {}", DisplayPath(path), written.message());
  }
}

}  // namespace xlens::runtime
