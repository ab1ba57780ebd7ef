#include "profiler/machine_limits_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "compiler/support/private_directory.h"
#include "compiler/support/terminal_text.h"

namespace xlens::profiler {

namespace {

// 2: the sweep has each cache level's capacity beside its half (SweepWorkingSets); limits kept
// before it are measured again.
constexpr std::string_view kFormat = "xlens machine limits 2";
// The file is a few kilobytes; anything much larger is not ours.
constexpr int64_t kMaxCacheBytes = 1 << 20;

// Upper ends of the plausible, far beyond any machine: a value past them is a damaged file.
constexpr double kMaxGbps = 1e6;
constexpr double kMaxGflops = 1e9;
constexpr int64_t kMaxBytes = int64_t{1} << 50;
constexpr int kMaxThreads = 1 << 16;
constexpr size_t kMaxPoints = 256;

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    // x86 names it "model name"; other architectures "CPU part"/"Processor" and the like.
    for (std::string_view key : {"model name", "Processor", "CPU part"}) {
      if (line.rfind(key, 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "unknown CPU";
}

nlohmann::json PointToJson(const BandwidthPoint& point) {
  return {{"working_set_bytes", point.working_set_bytes},
          {"copy_gbps", point.copy_gbps},
          {"triad_gbps", point.triad_gbps},
          {"read_gbps", point.read_gbps}};
}

// Field readers that say which field is wrong. `where` is the field's path ("sweep[3]").
StatusOr<const nlohmann::json*> Field(const nlohmann::json& object, const char* name,
                                      const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) return Error(fmt::format("{}{} is missing", where, name));
  return &*it;
}

StatusOr<double> Rate(const nlohmann::json& object, const char* name, const std::string& where,
                      double most) {
  ASSIGN_OR_RETURN(const nlohmann::json* value, Field(object, name, where));
  if (!value->is_number()) return Error(fmt::format("{}{} is not a number", where, name));
  const double rate = value->get<double>();
  if (!std::isfinite(rate) || rate < 0 || rate > most) {
    return Error(fmt::format("{}{} is {}, outside 0 to {:g}", where, name, value->dump(), most));
  }
  return rate;
}

StatusOr<int64_t> Count(const nlohmann::json& object, const char* name, const std::string& where,
                        int64_t least, int64_t most) {
  ASSIGN_OR_RETURN(const nlohmann::json* value, Field(object, name, where));
  if (!value->is_number_integer()) return Error(fmt::format("{}{} is not an integer", where, name));
  // Read as unsigned when it is one, so 2^64-1 is "too large", not -1.
  const bool too_large = value->is_number_unsigned() &&
                         value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const int64_t count = too_large ? std::numeric_limits<int64_t>::max() : value->get<int64_t>();
  if (too_large || count < least || count > most) {
    return Error(fmt::format("{}{} is {}, outside {} to {}", where, name, value->dump(), least, most));
  }
  return count;
}

StatusOr<BandwidthPoint> PointFromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return Error(fmt::format("{} is not an object", where));
  const std::string prefix = where + ".";
  BandwidthPoint point;
  ASSIGN_OR_RETURN(point.working_set_bytes, Count(json, "working_set_bytes", prefix, 1, kMaxBytes));
  ASSIGN_OR_RETURN(point.copy_gbps, Rate(json, "copy_gbps", prefix, kMaxGbps));
  ASSIGN_OR_RETURN(point.triad_gbps, Rate(json, "triad_gbps", prefix, kMaxGbps));
  ASSIGN_OR_RETURN(point.read_gbps, Rate(json, "read_gbps", prefix, kMaxGbps));
  return point;
}

}  // namespace

std::string MachineFingerprint() {
  std::string caches;
  for (const CacheLevel& level : DataCaches()) {
    caches += fmt::format("{}L{} {}x{}", caches.empty() ? "" : ", ", level.level, level.bytes, level.instances);
  }
  return fmt::format("{}; {} CPUs; {}; {}", CpuModel(), std::max(1u, std::thread::hardware_concurrency()),
                     WidestVectorIsa(), caches.empty() ? "caches unknown" : caches);
}

std::string MachineLimitsCachePath() {
  if (const char* path = std::getenv("XLENS_MACHINE_LIMITS_CACHE"); path != nullptr && *path != '\0') {
    return std::string_view(path) == "off" ? "" : path;
  }
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache == '/') {
    return std::string(cache) + "/xlens/machine_limits.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::string(home) + "/.cache/xlens/machine_limits.json";
  }
  return "";
}

std::string MachineLimitsToJson(const MachineLimits& limits, std::string_view fingerprint,
                                int64_t measured_unix_seconds) {
  nlohmann::json caches = nlohmann::json::array();
  for (const CacheLevel& level : limits.caches) {
    caches.push_back({{"level", level.level}, {"bytes", level.bytes}, {"instances", level.instances}});
  }
  nlohmann::json sweep = nlohmann::json::array();
  for (const BandwidthPoint& point : limits.sweep) sweep.push_back(PointToJson(point));
  const nlohmann::json json = {{"format", kFormat},
                               {"machine", fingerprint},
                               {"measured_unix_seconds", measured_unix_seconds},
                               {"threads", limits.threads},
                               {"caches", caches},
                               {"sweep", sweep},
                               {"memory", PointToJson(limits.memory)},
                               {"peak_gflops", limits.peak_gflops}};
  return json.dump(1) + "\n";
}

StatusOr<MachineLimits> MachineLimitsFromJson(std::string_view text, std::string_view fingerprint,
                                              int64_t* measured_unix_seconds) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return Error("is not a JSON object");
  auto format = json.find("format");
  if (format == json.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return Error(fmt::format("is not in the format \"{}\"", kFormat));
  }
  auto machine = json.find("machine");
  if (machine == json.end() || !machine->is_string()) return Error("machine is missing");
  if (machine->get<std::string>() != fingerprint) {
    return Error(fmt::format("holds the limits of another machine ({})", machine->get<std::string>()));
  }
  MachineLimits limits;
  ASSIGN_OR_RETURN(int64_t measured, Count(json, "measured_unix_seconds", "", 0, int64_t{1} << 40));
  if (measured_unix_seconds != nullptr) *measured_unix_seconds = measured;
  ASSIGN_OR_RETURN(int64_t threads, Count(json, "threads", "", 1, kMaxThreads));
  limits.threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(limits.peak_gflops, Rate(json, "peak_gflops", "", kMaxGflops));

  ASSIGN_OR_RETURN(const nlohmann::json* caches, Field(json, "caches", ""));
  if (!caches->is_array() || caches->size() > 16) return Error("caches is not a list of at most 16 levels");
  for (size_t i = 0; i < caches->size(); ++i) {
    const std::string where = fmt::format("caches[{}].", i);
    const nlohmann::json& entry = (*caches)[i];
    if (!entry.is_object()) return Error(fmt::format("caches[{}] is not an object", i));
    CacheLevel level;
    ASSIGN_OR_RETURN(int64_t number, Count(entry, "level", where, 1, 8));
    ASSIGN_OR_RETURN(level.bytes, Count(entry, "bytes", where, 1, kMaxBytes));
    ASSIGN_OR_RETURN(int64_t instances, Count(entry, "instances", where, 1, kMaxThreads));
    level.level = static_cast<int>(number);
    level.instances = static_cast<int>(instances);
    limits.caches.push_back(level);
  }
  ASSIGN_OR_RETURN(const nlohmann::json* sweep, Field(json, "sweep", ""));
  if (!sweep->is_array() || sweep->size() > kMaxPoints) {
    return Error(fmt::format("sweep is not a list of at most {} points", kMaxPoints));
  }
  for (size_t i = 0; i < sweep->size(); ++i) {
    ASSIGN_OR_RETURN(BandwidthPoint point, PointFromJson((*sweep)[i], fmt::format("sweep[{}]", i)));
    limits.sweep.push_back(point);
  }
  ASSIGN_OR_RETURN(const nlohmann::json* memory, Field(json, "memory", ""));
  ASSIGN_OR_RETURN(limits.memory, PointFromJson(*memory, "memory"));
  // Limits that bound nothing would print every row's share as a dash: measure again instead.
  if (limits.memory.best_gbps() <= 0 || limits.peak_gflops <= 0) {
    return Error("holds no memory bandwidth or no peak");
  }
  return limits;
}

StatusOr<MachineLimits> ReadKeptMachineLimits(const std::string& path, std::string_view fingerprint,
                                              int64_t* measured_unix_seconds) {
  bool missing = false;
  const std::string directory = ParentDirectory(path);
  if (std::string problem = PrivateDirectoryProblem(directory, /*create=*/false, &missing); !problem.empty()) {
    return Error(fmt::format("{}: its directory {}", path, problem));
  }
  if (missing) return Error(fmt::format("{}: no such file", path));
  // A link in our own directory is not what we wrote: refused, never followed.
  StatusOr<InputFile> file = InputFile::OpenNoFollow(path, kMaxCacheBytes);
  if (!file.ok()) return file.status();
  std::string text(static_cast<size_t>(file->size()), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ASSIGN_OR_RETURN(size_t n, file->Read(text.data() + got, text.size() - got));
    if (n == 0) break;
    got += n;
  }
  text.resize(got);
  StatusOr<MachineLimits> limits = MachineLimitsFromJson(text, fingerprint, measured_unix_seconds);
  if (!limits.ok()) return Error(fmt::format("{}: {}", path, limits.status().message()));
  return limits;
}

Status KeepMachineLimits(const std::string& path, const MachineLimits& limits,
                         std::string_view fingerprint, int64_t measured_unix_seconds) {
  bool missing = false;
  const std::string directory = ParentDirectory(path);
  if (std::string problem = PrivateDirectoryProblem(directory, /*create=*/true, &missing); !problem.empty()) {
    return Error(fmt::format("{}: its directory {}", path, problem));
  }
  ASSIGN_OR_RETURN(OutputFile file, OutputFile::CreateNoFollow(path));
  RETURN_IF_ERROR(file.Write(MachineLimitsToJson(limits, fingerprint, measured_unix_seconds)));
  return file.Commit();
}

const MachineLimits& ThisMachineLimits() {
  static const MachineLimits* limits = [] {
    const std::string path = MachineLimitsCachePath();
    const std::string fingerprint = MachineFingerprint();
    auto warn = [&](const std::string& what) {
      std::fprintf(stderr, "xlens: warning: %s\n", EscapeForTerminal(what).c_str());
    };
    if (!path.empty() && GetPathKind(path) != PathKind::kMissing) {
      int64_t measured = 0;
      StatusOr<MachineLimits> kept = ReadKeptMachineLimits(path, fingerprint, &measured);
      if (kept.ok()) {
        const std::time_t when = static_cast<std::time_t>(measured);
        std::tm utc{};
        gmtime_r(&when, &utc);
        char date[32];
        std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", &utc);
        kept->origin = fmt::format("this machine, measured {}, kept in {}", date, path);
        return new MachineLimits(*std::move(kept));
      }
      warn(fmt::format("{}; measuring the machine limits again", kept.status().message()));
    }
    MachineLimitsOptions options;
    options.repetitions = 3;
    options.fine = false;
    // Arrays past the last-level cache, but not four times it: this runs inside a user's command.
    const std::vector<CacheLevel> caches = DataCaches();
    options.memory_bytes = std::max<int64_t>(int64_t{64} << 20, caches.empty() ? 0 : caches.back().total_bytes());
    auto* measured = new MachineLimits(MeasureMachineLimits(options));
    if (!path.empty()) {
      if (Status kept = KeepMachineLimits(path, *measured, fingerprint, std::time(nullptr)); !kept.ok()) {
        warn(fmt::format("the machine limits could not be kept: {}", kept.message()));
      }
    }
    return measured;
  }();
  return *limits;
}

}  // namespace xlens::profiler
