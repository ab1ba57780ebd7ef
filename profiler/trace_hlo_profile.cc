#include "profiler/trace_hlo_profile.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <utility>
#include <variant>

#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/trace.h"

namespace xlens::profiler {
namespace {

namespace fs = std::filesystem;

bool IsTraceFileName(std::string_view name) {
  for (std::string_view suffix : {".xplane.pb", ".trace.json", ".trace.json.gz", ".ctf.json", ".ctf.json.gz"}) {
    if (name.ends_with(suffix)) return true;
  }
  return name == "perfetto_trace.json.gz" || name == "perfetto_trace.json";
}

std::string StringArg(const TraceEvent& event, const std::string& key) {
  const TraceArg* arg = FindArg(event, key);
  const std::string* text = arg ? std::get_if<std::string>(&arg->value) : nullptr;
  return text ? *text : "";
}

double NumberArg(const TraceEvent& event, const std::string& key) {
  const TraceArg* arg = FindArg(event, key);
  if (arg == nullptr) return 0;
  if (const int64_t* i = std::get_if<int64_t>(&arg->value)) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&arg->value)) return *d;
  return 0;
}

class ProfileVisitor : public ChromeTraceVisitor {
 public:
  bool WantsFlows() const override { return false; }
  void OnEvent(TraceEvent& event) override {
    std::string module = StringArg(event, "module");
    if (module.empty()) module = StringArg(event, "hlo_module");
    if (event.category == category::kExecute) {
      ++runs[module];
      return;
    }
    if (!IsKernelCategory(event.category)) return;
    std::string instruction = StringArg(event, "hlo_op");
    if (instruction.empty()) instruction = event.name;
    auto [it, inserted] = rows.try_emplace({module, instruction});
    TraceHloProfileRow& row = it->second;
    if (inserted) {
      row.module = module;
      row.instruction = instruction;
      row.kernel = StringArg(event, "kernel");
      if (row.kernel.empty()) row.kernel = event.name;
      row.category = event.category;
      row.fusion_kind = StringArg(event, "fusion_kind");
      row.op_names = StringArg(event, "op_names");
      row.source = StringArg(event, "source");
      row.min_ns = event.duration_ns;
    }
    ++row.count;
    row.total_ns += event.duration_ns;
    row.min_ns = std::min(row.min_ns, event.duration_ns);
    row.max_ns = std::max(row.max_ns, event.duration_ns);
    // A later phase of a multi-phase kernel says 0: the first that says something is kept.
    if (row.bytes_accessed == 0) row.bytes_accessed = NumberArg(event, "bytes_accessed");
    if (row.flops == 0) row.flops = NumberArg(event, "flops");
    if (row.transcendentals == 0) row.transcendentals = NumberArg(event, "transcendentals");
  }

  std::map<std::pair<std::string, std::string>, TraceHloProfileRow> rows;
  std::map<std::string, int64_t> runs;
};

}  // namespace

StatusOr<std::string> FindTraceFile(const std::string& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return path;  // the reader says what is wrong with a file
  std::string best;
  bool best_is_xspace = false;
  fs::file_time_type best_time;
  // Bounded: a profile folder is shallow, and a huge tree must not be walked.
  constexpr int kMaxDepth = 4;
  constexpr int kMaxEntries = 100000;
  int entries = 0;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, error), end;
  for (; !error && it != end && entries < kMaxEntries; it.increment(error), ++entries) {
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    const std::string name = it->path().filename().string();
    if (!IsTraceFileName(name) || !it->is_regular_file(error)) continue;
    const bool is_xspace = name.ends_with(".xplane.pb");
    const fs::file_time_type time = it->last_write_time(error);
    if (best.empty() || (is_xspace && !best_is_xspace) || (is_xspace == best_is_xspace && time > best_time)) {
      best = it->path().string();
      best_is_xspace = is_xspace;
      best_time = time;
    }
  }
  if (best.empty()) {
    return Error("trace: " + DisplayPath(path) +
                 ": no trace in the folder (timeline.ctf.json, *.trace.json.gz, perfetto_trace.json.gz or *.xplane.pb)");
  }
  return best;
}

StatusOr<TraceHloProfile> TraceHloProfileOf(const std::string& path) {
  TraceHloProfile profile;
  ASSIGN_OR_RETURN(profile.file, FindTraceFile(path));
  ProfileVisitor visitor;
  RETURN_IF_ERROR(StreamChromeTrace(profile.file, visitor).status());
  profile.runs = std::move(visitor.runs);
  profile.runs.erase("");
  for (auto& [key, row] : visitor.rows) profile.rows.push_back(std::move(row));
  std::stable_sort(profile.rows.begin(), profile.rows.end(), [](const TraceHloProfileRow& a, const TraceHloProfileRow& b) {
    if (a.module != b.module) return a.module < b.module;
    return a.total_ns > b.total_ns;
  });
  return profile;
}

}  // namespace xlens::profiler
