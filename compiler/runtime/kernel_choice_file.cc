#include "compiler/runtime/kernel_choice_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "compiler/support/private_directory.h"
#include "compiler/support/terminal_text.h"

namespace xlens::runtime {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFormat = "xlens kernel choices";
constexpr std::string_view kEntrySuffix = ".xlenschoice";

std::string Sha256Hex(std::string_view text) {
  llvm::SHA256 sha;
  sha.update(llvm::StringRef(text.data(), text.size()));
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

// Text of at most kMaxTextBytes at `field` of `object`, or why not.
StatusOr<std::string> TextField(const json& object, const char* field, std::string_view where) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return Error(fmt::format("{}: \"{}\" is missing or not a string", where, field));
  }
  const std::string& text = it->get_ref<const std::string&>();
  if (text.empty() || text.size() > kMaxTextBytes) {
    return Error(fmt::format("{}: \"{}\" is empty or longer than {} bytes", where, field, kMaxTextBytes));
  }
  return text;
}

StatusOr<KernelChoiceRecord> RecordFrom(const json& object, std::string_view where) {
  if (!object.is_object()) return Error(fmt::format("{}: not an object", where));
  KernelChoiceRecord record;
  ASSIGN_OR_RETURN(record.machine, TextField(object, "machine", where));
  ASSIGN_OR_RETURN(record.key, TextField(object, "key", where));
  ASSIGN_OR_RETURN(std::string winner, TextField(object, "winner", where));
  auto candidates = object.find("candidates");
  auto times = object.find("best_ms");
  if (candidates == object.end() || !candidates->is_array() || candidates->size() < 2 ||
      candidates->size() > 64) {
    return Error(fmt::format("{}: \"candidates\" is not an array of 2 to 64 names", where));
  }
  if (times == object.end() || !times->is_array() || times->size() != candidates->size()) {
    return Error(fmt::format("{}: \"best_ms\" is not an array of one time per candidate", where));
  }
  for (size_t i = 0; i < candidates->size(); ++i) {
    const json& name = (*candidates)[i];
    const json& ms = (*times)[i];
    if (!name.is_string() || name.get_ref<const std::string&>().empty() ||
        name.get_ref<const std::string&>().size() > kMaxTextBytes) {
      return Error(fmt::format("{}: candidate {} is not a name", where, i));
    }
    if (!ms.is_number() || !std::isfinite(ms.get<double>()) || ms.get<double>() < 0) {
      return Error(fmt::format("{}: best_ms[{}] is not a finite time of 0 or more", where, i));
    }
    record.candidates.push_back(name.get<std::string>());
    record.best_ms.push_back(ms.get<double>());
  }
  auto found = std::find(record.candidates.begin(), record.candidates.end(), winner);
  if (found == record.candidates.end()) {
    return Error(fmt::format("{}: the winner {} is not one of its candidates", where, EscapeForTerminal(winner)));
  }
  record.winner = static_cast<int>(found - record.candidates.begin());
  return record;
}

// Times to 0.1 us: what a timing on a shared machine can say.
std::vector<double> Rounded(std::vector<double> ms) {
  for (double& t : ms) t = std::round(t * 1e4) / 1e4;
  return ms;
}

// Whether `dir` may hold choices (created when `create`); a refusal is said once per directory
// in the process, as the object cache says it, not at every shape of every compilation.
bool UsableDirectory(const std::string& dir, bool create, std::string* warning) {
  bool missing = false;
  const std::string problem = PrivateDirectoryProblem(dir, create, &missing);
  if (problem.empty()) return !missing;
  static std::mutex mutex;
  static auto* reported = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mutex);
  if (reported->insert(dir).second) {
    *warning = fmt::format("persistent cache directory {} {}; kernel choices are timed in every process",
                           DisplayPath(dir), problem);
  }
  return false;
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

std::string SerializeKernelChoices(const std::vector<KernelChoiceRecord>& records) {
  json choices = json::array();
  for (const KernelChoiceRecord& r : records) {
    choices.push_back({{"machine", r.machine},
                       {"key", r.key},
                       {"candidates", r.candidates},
                       {"best_ms", Rounded(r.best_ms)},
                       {"winner", r.candidates.at(static_cast<size_t>(r.winner))}});
  }
  // Invalid UTF-8 in a name (it came from a library) is replaced, never thrown on.
  return json{{"format", kFormat}, {"version", kKernelChoiceFormatVersion}, {"choices", choices}}.dump(
             1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

StatusOr<std::vector<KernelChoiceRecord>> ParseKernelChoices(std::string_view text, std::string_view source) {
  json document;
  try {
    document = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // nlohmann's message says where (byte offset) and what it read, control characters escaped.
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.starts_with("[json.exception") && at != std::string::npos) {
      what = what.substr(at + 2);
    }
    return Error(fmt::format("{}: not JSON ({})", source, EscapeForTerminal(TruncateUtf8(what, 200))));
  }
  auto format = document.is_object() ? document.find("format") : document.end();
  if (!document.is_object() || format == document.end() || !format->is_string() ||
      format->get_ref<const std::string&>() != kFormat) {
    return Error(fmt::format("{}: not a kernel choices file (no \"format\": \"{}\")", source, kFormat));
  }
  const json version = document.contains("version") ? document["version"] : json();
  if (!version.is_number_integer() || version.get<int64_t>() != kKernelChoiceFormatVersion) {
    return Error(fmt::format("{}: format version {}, expected {}", source, EscapeForTerminal(version.dump()),
                             kKernelChoiceFormatVersion));
  }
  auto choices = document.find("choices");
  if (choices == document.end() || !choices->is_array()) {
    return Error(fmt::format("{}: \"choices\" is missing or not an array", source));
  }
  std::vector<KernelChoiceRecord> records;
  for (size_t i = 0; i < choices->size(); ++i) {
    ASSIGN_OR_RETURN(KernelChoiceRecord record, RecordFrom((*choices)[i], fmt::format("{}: choice {}", source, i)));
    records.push_back(std::move(record));
  }
  return records;
}

std::string KernelChoiceCachePath(const std::string& dir, const std::string& machine, const std::string& key) {
  return fmt::format("{}/{}{}", dir, Sha256Hex(machine + std::string(1, '\0') + key), kEntrySuffix);
}

std::optional<KernelChoiceRecord> LookupKernelChoice(const std::string& dir, const std::string& machine,
                                                     const std::string& key, std::string* warning) {
  if (!UsableDirectory(dir, /*create=*/false, warning)) return std::nullopt;  // refused, or not made yet
  const std::string path = KernelChoiceCachePath(dir, machine, key);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;  // not timed yet
  auto reject = [&](const std::string& why) -> std::optional<KernelChoiceRecord> {
    *warning = fmt::format("kernel choice cache entry {} is rejected ({}); timing again", DisplayPath(path), why);
    return std::nullopt;
  };
  StatusOr<InputFile> file = InputFile::OpenNoFollow(path, kMaxCacheEntryBytes);
  if (!file.ok()) return reject(file.status().message());
  std::string text(static_cast<size_t>(file->size()), '\0');
  size_t filled = 0;
  while (filled < text.size()) {
    StatusOr<size_t> n = file->Read(text.data() + filled, text.size() - filled);
    if (!n.ok()) return reject(n.status().message());
    if (*n == 0) break;
    filled += *n;
  }
  text.resize(filled);
  StatusOr<std::vector<KernelChoiceRecord>> records = ParseKernelChoices(text, "it");
  if (!records.ok()) return reject(records.status().message());
  if (records->size() != 1) return reject(fmt::format("{} choices where an entry holds one", records->size()));
  if ((*records)[0].machine != machine || (*records)[0].key != key) {
    return reject("it holds another machine's or shape's choice");
  }
  return std::move((*records)[0]);
}

void StoreKernelChoice(const std::string& dir, const KernelChoiceRecord& record, std::string* warning) {
  if (!UsableDirectory(dir, /*create=*/true, warning)) return;
  const std::string path = KernelChoiceCachePath(dir, record.machine, record.key);
  StatusOr<OutputFile> file = OutputFile::CreateNoFollow(path);
  Status written = file.ok() ? file->Write(SerializeKernelChoices({record})) : file.status();
  if (written.ok()) written = file->Commit();
  if (!written.ok()) {
    *warning = fmt::format("cannot write kernel choice cache entry {}: {}", DisplayPath(path), written.message());
  }
}

}  // namespace xlens::runtime
