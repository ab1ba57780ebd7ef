#include "profiler/chrome_trace_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace xlens::profiler {

namespace {

using json = nlohmann::json;

// More than this, uncompressed, is not a trace we can show; it also stops a gzip bomb.
constexpr size_t kMaxTraceBytes = size_t{4} << 30;

// Reads a plain or gzip file (zlib reads plain files through unchanged).
StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string text;
  char chunk[1 << 16];
  while (true) {
    int n = gzread(file, chunk, sizeof(chunk));
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(file, &code);
      gzclose(file);
      return Error(fmt::format("{}: cannot read: {}", path, why));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > kMaxTraceBytes) {
      gzclose(file);
      return Error(fmt::format("{}: larger than {} GiB uncompressed", path, kMaxTraceBytes >> 30));
    }
  }
  // A gzip stream cut short reads as a clean end of file; zlib says so only here.
  int code = 0;
  const char* why = gzerror(file, &code);
  std::string message = code != Z_OK ? why : "";
  gzclose(file);
  if (!message.empty()) return Error(fmt::format("{}: cannot read: {}", path, message));
  return text;
}

std::pair<size_t, size_t> LineAndColumn(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

const char* TypeName(const json& value) { return value.type_name(); }

// Reads one event's fields with errors that say which event and which field.
class EventReader {
 public:
  EventReader(const std::string& source, size_t index, const json& event)
      : source_(source), index_(index), event_(event) {}

  Status Fail(const std::string& what) const {
    std::string name;
    auto it = event_.find("name");
    if (it != event_.end() && it->is_string()) name = fmt::format(" (\"{}\")", it->get<std::string>().substr(0, 80));
    return Error(fmt::format("{}: event {}{}: {}", source_, index_, name, what));
  }

  StatusOr<std::string> String(const char* key, bool required) const {
    auto it = event_.find(key);
    if (it == event_.end()) {
      if (required) return Fail(fmt::format("expected \"{}\" (a string)", key));
      return std::string();
    }
    if (!it->is_string()) {
      return Fail(fmt::format("\"{}\" must be a string, not {}", key, TypeName(*it)));
    }
    return it->get<std::string>();
  }

  // Microseconds (a JSON number) to nanoseconds.
  StatusOr<int64_t> Micros(const char* key) const {
    auto it = event_.find(key);
    if (it == event_.end()) return Fail(fmt::format("expected \"{}\" (microseconds)", key));
    if (!it->is_number()) {
      return Fail(fmt::format("\"{}\" must be a number, not {}", key, TypeName(*it)));
    }
    double us = it->get<double>();
    if (!std::isfinite(us) || std::fabs(us) > 9.0e15) {
      return Fail(fmt::format("\"{}\" is out of range", key));
    }
    return static_cast<int64_t>(std::llround(us * 1000.0));
  }

  // A pid or tid: a number, or a string that names the track (Kineto writes some as strings).
  StatusOr<int64_t> Id(const char* key, std::map<std::string, int64_t>& named_ids) const {
    auto it = event_.find(key);
    if (it == event_.end()) return int64_t{0};
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_number()) return static_cast<int64_t>(it->get<double>());
    if (it->is_string()) {
      // Negative, so a named track never takes the number of a numbered one.
      auto [entry, inserted] =
          named_ids.emplace(it->get<std::string>(), -1 - static_cast<int64_t>(named_ids.size()));
      return entry->second;
    }
    return Fail(fmt::format("\"{}\" must be a number or a string, not {}", key, TypeName(*it)));
  }

 private:
  const std::string& source_;
  size_t index_;
  const json& event_;
};

// Compact text of a nested value, cut off below a depth (a hostile file cannot recurse deep).
void AppendNested(const json& value, int depth, std::string& out) {
  if (depth > 16 && (value.is_array() || value.is_object())) {
    out += "...";
    return;
  }
  if (value.is_array()) {
    out += '[';
    bool first = true;
    for (const json& item : value) {
      if (!first) out += ',';
      first = false;
      AppendNested(item, depth + 1, out);
    }
    out += ']';
  } else if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ',';
      first = false;
      out += json(key).dump();
      out += ':';
      AppendNested(item, depth + 1, out);
    }
    out += '}';
  } else {
    out += value.dump();
  }
}

TraceArgValue ArgValue(const json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) return value.get<double>();
  if (value.is_boolean()) return int64_t{value.get<bool>()};
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && std::all_of(value.begin(), value.end(),
                                      [](const json& v) { return v.is_number_integer(); })) {
    std::vector<int64_t> list;
    for (const json& v : value) list.push_back(v.get<int64_t>());
    return list;
  }
  std::string text;  // objects, nested or mixed lists, null: kept readable as text
  AppendNested(value, 0, text);
  return text;
}

std::vector<TraceArg> Args(const json& event) {
  std::vector<TraceArg> args;
  auto it = event.find("args");
  if (it == event.end() || !it->is_object()) return args;
  for (const auto& [key, value] : it->items()) args.push_back({key, ArgValue(value)});
  return args;
}

struct FlowPoint {
  int64_t id;
  int32_t pid;
  int64_t tid;
  int64_t ts_ns;
  bool is_start;
};

// Binds each flow point to the innermost event on its track that contains it (a flow from a
// launch starts at the launch; one into a kernel ends at the kernel's start).
int64_t BindFlows(Trace& trace, const std::vector<FlowPoint>& points) {
  std::map<std::pair<int32_t, int64_t>, std::vector<size_t>> tracks;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    tracks[{trace.events[i].pid, trace.events[i].tid}].push_back(i);
  }
  for (auto& [key, indices] : tracks) {
    std::stable_sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      return trace.events[a].start_ns < trace.events[b].start_ns;
    });
  }
  int64_t unbound = 0;
  for (const FlowPoint& point : points) {
    auto it = tracks.find({point.pid, point.tid});
    TraceEvent* best = nullptr;
    if (it != tracks.end()) {
      const std::vector<size_t>& indices = it->second;
      // The innermost event containing the point is the one that started last before it; a few
      // steps back reach it in nested host tracks.
      auto after = std::upper_bound(indices.begin(), indices.end(), point.ts_ns,
                                    [&](int64_t ts, size_t i) { return ts < trace.events[i].start_ns; });
      for (int steps = 0; after != indices.begin() && steps < 64; ++steps) {
        TraceEvent& event = trace.events[*--after];
        if (point.ts_ns <= event.start_ns + event.duration_ns) {
          best = &event;
          break;
        }
      }
    }
    if (best == nullptr) {
      ++unbound;
      continue;
    }
    (point.is_start ? best->flow_out : best->flow_in) = point.id;
  }
  return unbound;
}

}  // namespace

StatusOr<Trace> ParseChromeTrace(const std::string& text, const std::string& source) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    // Chrome's array form may end without its "]" (a trace cut off while recording).
    size_t first = text.find_first_not_of(" \t\r\n");
    bool retried = false;
    if (first != std::string::npos && text[first] == '[') {
      std::string closed = text;
      while (!closed.empty() && (std::isspace(static_cast<unsigned char>(closed.back())) ||
                                 closed.back() == ',')) {
        closed.pop_back();
      }
      closed += "]";
      try {
        document = json::parse(closed);
        retried = true;
      } catch (const json::parse_error&) {
      }
    }
    if (!retried) {
      auto [line, column] = LineAndColumn(text, error.byte == 0 ? 0 : error.byte - 1);
      std::string what = error.what();
      // nlohmann's text is "[json.exception.parse_error.101] parse error at line ..., column ...:
      // syntax error while parsing value - invalid literal; last read: '...'": keep the reason.
      size_t colon = what.find("syntax error");
      if (colon == std::string::npos) colon = what.find(": ");
      std::string reason = colon == std::string::npos ? what : what.substr(colon);
      if (reason.size() > 200) reason = reason.substr(0, 200) + "...";
      if (reason.rfind(": ", 0) == 0) reason = reason.substr(2);
      return Error(fmt::format("{}:{}:{}: not valid JSON: {}", source, line, column, reason));
    }
  }

  const json* events = nullptr;
  Trace trace;
  if (document.is_array()) {
    events = &document;
  } else if (document.is_object()) {
    auto it = document.find("traceEvents");
    if (it == document.end()) {
      return Error(fmt::format("{}: expected a \"traceEvents\" list in the top-level object", source));
    }
    if (!it->is_array()) {
      return Error(fmt::format("{}: \"traceEvents\" must be a list, not {}", source, TypeName(*it)));
    }
    events = &*it;
    auto base = document.find("baseTimeNanoseconds");
    if (base != document.end()) {
      if (!base->is_number_integer()) {
        return Error(fmt::format("{}: \"baseTimeNanoseconds\" must be an integer, not {}", source,
                                 TypeName(*base)));
      }
      trace.base_ns = base->get<int64_t>();
    }
    auto other = document.find("otherData");
    if (other != document.end() && other->is_object()) {
      for (const auto& [key, value] : other->items()) trace.metadata.push_back({key, ArgValue(value)});
    }
  } else {
    return Error(fmt::format("{}: expected a JSON object with \"traceEvents\" or a list of events, "
                             "not {}",
                             source, TypeName(document)));
  }

  std::map<std::string, int64_t> named_ids;
  std::map<int32_t, TraceProcess> processes;
  std::map<std::pair<int32_t, int64_t>, TraceThread> threads;
  std::map<std::pair<int32_t, int64_t>, std::vector<TraceEvent>> open_spans;  // "B" without "E"
  std::vector<FlowPoint> flows;

  for (size_t index = 0; index < events->size(); ++index) {
    const json& raw = (*events)[index];
    if (!raw.is_object()) {
      return Error(fmt::format("{}: event {}: expected an object, not {}", source, index,
                               TypeName(raw)));
    }
    EventReader reader(source, index, raw);
    ASSIGN_OR_RETURN(std::string phase, reader.String("ph", /*required=*/true));
    ASSIGN_OR_RETURN(int64_t pid64, reader.Id("pid", named_ids));
    ASSIGN_OR_RETURN(int64_t tid, reader.Id("tid", named_ids));
    int32_t pid = static_cast<int32_t>(pid64);
    if (phase == "M") {
      ASSIGN_OR_RETURN(std::string name, reader.String("name", true));
      std::vector<TraceArg> args = Args(raw);
      const TraceArg* value = args.empty() ? nullptr : &args.front();
      auto as_string = [&]() -> std::string {
        if (value == nullptr) return "";
        if (const auto* s = std::get_if<std::string>(&value->value)) return *s;
        return "";
      };
      auto as_int = [&]() -> int64_t {
        if (value == nullptr) return 0;
        if (const auto* i = std::get_if<int64_t>(&value->value)) return *i;
        if (const auto* d = std::get_if<double>(&value->value)) return static_cast<int64_t>(*d);
        return 0;
      };
      if (name == "process_name") {
        processes[pid].pid = pid;
        processes[pid].name = as_string();
      } else if (name == "process_sort_index") {
        processes[pid].pid = pid;
        processes[pid].sort_index = as_int();
      } else if (name == "thread_name") {
        TraceThread& thread = threads[{pid, tid}];
        thread.pid = pid;
        thread.tid = tid;
        thread.name = as_string();
      } else if (name == "thread_sort_index") {
        TraceThread& thread = threads[{pid, tid}];
        thread.pid = pid;
        thread.tid = tid;
        thread.sort_index = as_int();
      }
      continue;
    }
    if (phase == "X" || phase == "B" || phase == "i" || phase == "I") {
      TraceEvent event;
      ASSIGN_OR_RETURN(event.name, reader.String("name", false));
      ASSIGN_OR_RETURN(event.category, reader.String("cat", false));
      ASSIGN_OR_RETURN(int64_t ts, reader.Micros("ts"));
      event.pid = pid;
      event.tid = tid;
      event.start_ns = trace.base_ns + ts;
      if (phase == "X") {
        ASSIGN_OR_RETURN(event.duration_ns, reader.Micros("dur"));
        if (event.duration_ns < 0) return reader.Fail("\"dur\" is negative");
      }
      event.args = Args(raw);
      if (phase == "B") {
        open_spans[{pid, tid}].push_back(std::move(event));
      } else {
        trace.events.push_back(std::move(event));
      }
      continue;
    }
    if (phase == "E") {
      ASSIGN_OR_RETURN(int64_t ts, reader.Micros("ts"));
      auto& stack = open_spans[{pid, tid}];
      if (stack.empty()) continue;  // an end whose begin was cut off
      TraceEvent event = std::move(stack.back());
      stack.pop_back();
      event.duration_ns = std::max<int64_t>(0, trace.base_ns + ts - event.start_ns);
      for (TraceArg& arg : Args(raw)) event.args.push_back(std::move(arg));
      trace.events.push_back(std::move(event));
      continue;
    }
    if (phase == "s" || phase == "f") {
      ASSIGN_OR_RETURN(int64_t ts, reader.Micros("ts"));
      auto id = raw.find("id");
      if (id == raw.end() || !(id->is_number_integer() || id->is_string())) {
        return reader.Fail("a flow event needs an \"id\" (an integer or a string)");
      }
      int64_t flow_id = id->is_number_integer()
                            ? id->get<int64_t>()
                            : static_cast<int64_t>(std::hash<std::string>{}(id->get<std::string>()) >> 1);
      flows.push_back({flow_id, pid, tid, trace.base_ns + ts, phase == "s"});
      continue;
    }
    // Counters, async and object events: not shown by our tools, skipped.
  }

  for (auto& [key, process] : processes) trace.processes.push_back(std::move(process));
  for (auto& [key, thread] : threads) trace.threads.push_back(std::move(thread));
  int64_t unbound = BindFlows(trace, flows);
  if (unbound > 0) trace.metadata.push_back({"unbound_flow_points", unbound});
  return trace;
}

StatusOr<Trace> ReadChromeTrace(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadMaybeGzip(path));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error(fmt::format("{}: empty file, expected a Chrome trace (JSON)", path));
  }
  return ParseChromeTrace(text, path);
}

}  // namespace xlens::profiler
