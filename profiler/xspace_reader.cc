#include "profiler/xspace_reader.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::profiler {

namespace {

// What the reader keeps beside the file (one plane's metadata tables, flow points) is bounded as
// the JSON reader's is: 256 MiB, or the input limit when that is smaller.
size_t MaxRetainedBytes() { return static_cast<size_t>(std::min<int64_t>(int64_t{256} << 20, MaxInputBytes())); }
constexpr size_t kEntryBytes = 96;  // a table node beside its views
// Stats of one event metadata entry that are kept (TensorFlow writes at most a handful).
constexpr size_t kMaxMetadataStats = 64;
// Stats of one event that become args (TensorFlow writes at most a few dozen).
constexpr size_t kMaxEventStats = 1024;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// One field as read: its number, wire type and value (an integer, or the bytes it spans).
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t integer = 0;
  std::string_view bytes;
};

// Walks one message's fields. Errors name the file, the message and where it is.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& source, const char* message, uint64_t base)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()),
        begin_(p_), source_(source), message_(message), base_(base) {}

  // A reader of the same message from its start (for a second pass).
  Reader Fresh() const {
    return Reader(std::string_view(reinterpret_cast<const char*>(begin_), static_cast<size_t>(end_ - begin_)), source_,
                  message_, base_);
  }

  // The next field; false at the end or on an error (status() says which).
  bool Next(Field& field) {
    if (p_ == end_ || !status_.ok()) return false;
    uint64_t key;
    if (!Varint(key, "a field's key")) return false;
    field.number = static_cast<uint32_t>(key >> 3);
    field.wire = static_cast<uint32_t>(key & 7);
    if (key >> 3 == 0 || key >> 3 > 536870911) return Fail(fmt::format("field number {} is not valid", key >> 3));
    switch (field.wire) {
      case kVarint: return Varint(field.integer, "a varint");
      case kFixed64:
        if (end_ - p_ < 8) return Fail(fmt::format("field {} is cut off (8 bytes expected)", field.number));
        std::memcpy(&field.integer, p_, 8);
        p_ += 8;
        return true;
      case kFixed32: {
        if (end_ - p_ < 4) return Fail(fmt::format("field {} is cut off (4 bytes expected)", field.number));
        uint32_t value;
        std::memcpy(&value, p_, 4);
        field.integer = value;
        p_ += 4;
        return true;
      }
      case kLength: {
        uint64_t size;
        if (!Varint(size, "a length")) return false;
        if (size > static_cast<uint64_t>(end_ - p_)) {
          return Fail(fmt::format("field {} claims {} bytes, only {} are left", field.number, size, end_ - p_));
        }
        field.bytes = std::string_view(reinterpret_cast<const char*>(p_), size);
        p_ += size;
        return true;
      }
      default:
        return Fail(fmt::format("field {} has wire type {} (groups or invalid), which XSpace never uses",
                                field.number, field.wire));
    }
  }

  // A field of the schema's `wire` type, or an error naming it.
  bool Expect(const Field& field, uint32_t wire, const char* name) {
    if (field.wire == wire) return true;
    return Fail(fmt::format("field {} ({}) has wire type {}, expected {}", field.number, name, field.wire, wire));
  }

  // The bytes of `field` as a nested message's reader, at its place in the file.
  Reader Nested(const Field& field, const char* message) const {
    uint64_t offset = base_ + static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(field.bytes.data()) - begin_);
    return Reader(field.bytes, source_, message, offset);
  }

  const Status& status() const { return status_; }
  bool Fail(const std::string& what) {
    if (status_.ok()) {
      status_ = Error(fmt::format("{}: not a valid XSpace: {} at byte {}: {}", source_, message_,
                                  base_ + static_cast<uint64_t>(p_ - begin_), what));
    }
    return false;
  }

 private:
  bool Varint(uint64_t& out, const char* what) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return Fail(fmt::format("{} is cut off", what));
      uint8_t byte = *p_++;
      out |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return Fail(fmt::format("{} is longer than 10 bytes", what));
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  const std::string& source_;
  const char* message_;
  uint64_t base_;
  Status status_;
};

// A status from a nested reader, or from the outer one.
#define XSPACE_CHECK(reader) \
  if (!(reader).status().ok()) return (reader).status()

struct EventMetadata {
  std::string_view name;
  std::string_view display_name;
  std::vector<std::string_view> stats;  // XStat messages, read when an event uses them
};

// The file mapped into memory, unmapped when done.
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr && data_ != MAP_FAILED) munmap(data_, size_);
  }
  Status Map(const InputFile& file) {
    size_ = static_cast<size_t>(file.size());
    if (size_ == 0) return OkStatus();
    data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (data_ == MAP_FAILED) return Error(fmt::format("{}: cannot map the file: {}", DisplayPath(file.path()), std::strerror(errno)));
    madvise(data_, size_, MADV_SEQUENTIAL);
    return OkStatus();
  }
  std::string_view bytes() const {
    return data_ == nullptr || data_ == MAP_FAILED ? std::string_view() : std::string_view(static_cast<const char*>(data_), size_);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

class XSpaceWalker {
 public:
  XSpaceWalker(std::string_view bytes, const std::string& source, ChromeTraceVisitor& visitor)
      : bytes_(bytes), source_(source), visitor_(visitor), wants_args_(visitor.WantsArgs()),
        wants_flows_(visitor.WantsFlows()) {}

  StatusOr<ChromeTraceHeader> Walk() {
    if (bytes_.empty()) return Error(fmt::format("{}: empty file, expected an XSpace (*.xplane.pb)", source_));
    Reader space(bytes_, source_, "XSpace", 0);
    Field field;
    int32_t plane_index = 0;
    while (space.Next(field)) {
      if (field.number == 1) {
        if (!space.Expect(field, kLength, "planes")) break;
        Reader plane = space.Nested(field, "XPlane");
        RETURN_IF_ERROR(Plane(plane, plane_index++));
      } else if (field.number >= 2 && field.number <= 4) {
        if (!space.Expect(field, kLength, "a string")) break;
        static constexpr const char* kKeys[] = {"", "", "xspace_error", "xspace_warning", "hostname"};
        if (header_.metadata.size() < 64) {
          header_.metadata.push_back({kKeys[field.number], std::string(TruncateUtf8(field.bytes, 1000))});
        }
      }
    }
    XSPACE_CHECK(space);
    BindFlows();
    header_.metadata.push_back({"format", std::string("xspace")});
    if (missing_metadata_ > 0) header_.metadata.push_back({"xspace_events_without_metadata", missing_metadata_});
    if (aggregated_ > 0) header_.metadata.push_back({"xspace_aggregated_events_skipped", aggregated_});
    return std::move(header_);
  }

 private:
  bool Take(size_t bytes) {
    if (bytes > MaxRetainedBytes() - std::min(retained_, MaxRetainedBytes())) return false;
    retained_ += bytes;
    return true;
  }
  Status TakeTrack(size_t name_bytes) {
    if (!Take(kEntryBytes + name_bytes)) return Exceeded();
    track_bytes_ += kEntryBytes + name_bytes;
    return OkStatus();
  }
  Status Exceeded() const {
    return Error(fmt::format("{}: the XSpace makes the reader hold more than {} of tracks, metadata and flow points: more "
                             "than any profile needs",
                             source_, FormatBytes(static_cast<int64_t>(MaxRetainedBytes()))));
  }

  Status Plane(Reader& plane, int32_t pid) {
    // Pass 1: the name and the tables (TensorFlow writes them after the lines).
    event_metadata_.clear();
    stat_names_.clear();
    retained_ = flow_bytes_ + track_bytes_;  // the last plane's tables are gone
    std::string_view name;
    Field field;
    bool has_lines = false;
    while (plane.Next(field)) {
      switch (field.number) {
        case 2:
          if (!plane.Expect(field, kLength, "name")) break;
          name = field.bytes;
          break;
        case 3:
          if (!plane.Expect(field, kLength, "lines")) break;
          has_lines = true;
          break;
        case 4: {
          if (!plane.Expect(field, kLength, "event_metadata")) break;
          Reader entry = plane.Nested(field, "XPlane.event_metadata entry");
          RETURN_IF_ERROR(EventMetadataEntry(entry));
          break;
        }
        case 5: {
          if (!plane.Expect(field, kLength, "stat_metadata")) break;
          Reader entry = plane.Nested(field, "XPlane.stat_metadata entry");
          RETURN_IF_ERROR(StatMetadataEntry(entry));
          break;
        }
        default: break;
      }
    }
    XSPACE_CHECK(plane);
    if (!has_lines) return OkStatus();
    plane_name_ = name;
    device_plane_ = StartsWith(name, "/device:");
    RETURN_IF_ERROR(TakeTrack(std::min<size_t>(name.size(), 1000)));
    header_.processes.push_back({pid, std::string(TruncateUtf8(name, 1000)), pid});
    // Pass 2: the lines, with the tables complete.
    Reader lines = plane.Fresh();
    while (lines.Next(field)) {
      if (field.number != 3) continue;
      Reader line = lines.Nested(field, "XLine");
      RETURN_IF_ERROR(Line(line, pid));
    }
    XSPACE_CHECK(lines);
    return OkStatus();
  }

  Status EventMetadataEntry(Reader& entry) {
    Field field;
    int64_t key = 0;
    EventMetadata metadata;
    while (entry.Next(field)) {
      if (field.number == 1) {
        if (!entry.Expect(field, kVarint, "key")) break;
        key = static_cast<int64_t>(field.integer);
      } else if (field.number == 2) {
        if (!entry.Expect(field, kLength, "value")) break;
        Reader value = entry.Nested(field, "XEventMetadata");
        Field inner;
        while (value.Next(inner)) {
          if (inner.number == 2 && value.Expect(inner, kLength, "name")) metadata.name = inner.bytes;
          if (inner.number == 4 && value.Expect(inner, kLength, "display_name")) metadata.display_name = inner.bytes;
          // A few stats are enough for any name; more would make every event re-read them.
          if (inner.number == 5 && value.Expect(inner, kLength, "stats") && metadata.stats.size() < kMaxMetadataStats) {
            if (!Take(sizeof(std::string_view))) return Exceeded();
            metadata.stats.push_back(inner.bytes);
          }
        }
        XSPACE_CHECK(value);
      }
    }
    XSPACE_CHECK(entry);
    // A repeated key replaces its entry (as protobuf's map does) and costs nothing more.
    auto [it, added] = event_metadata_.try_emplace(key);
    if (added && !Take(kEntryBytes)) return Exceeded();
    it->second = std::move(metadata);
    return OkStatus();
  }

  Status StatMetadataEntry(Reader& entry) {
    Field field;
    int64_t key = 0;
    std::string_view name;
    while (entry.Next(field)) {
      if (field.number == 1) {
        if (!entry.Expect(field, kVarint, "key")) break;
        key = static_cast<int64_t>(field.integer);
      } else if (field.number == 2) {
        if (!entry.Expect(field, kLength, "value")) break;
        Reader value = entry.Nested(field, "XStatMetadata");
        Field inner;
        while (value.Next(inner)) {
          if (inner.number == 2 && value.Expect(inner, kLength, "name")) name = inner.bytes;
        }
        XSPACE_CHECK(value);
      }
    }
    XSPACE_CHECK(entry);
    auto [it, added] = stat_names_.try_emplace(key);
    if (added && !Take(kEntryBytes)) return Exceeded();
    it->second = name;
    return OkStatus();
  }

  // A line's category for the events on it that are not kernels of their own.
  static std::string LineCategory(std::string_view line) {
    if (line == "XLA Ops") return "xla_op";
    if (line == "XLA Modules") return "xla_module";
    if (line == "Steps") return "step";
    if (line == "TensorFlow Ops" || line == "TensorFlow Name Scope" || line == "Framework Ops") return "framework_op";
    if (line == "Source code") return "source";
    return "";
  }

  Status Line(Reader& line, int32_t pid) {
    // Pass 1: the line's own fields (events may come before them).
    Field field;
    int64_t id = 0, display_id = 0, timestamp_ns = 0;
    std::string_view name, display_name;
    while (line.Next(field)) {
      switch (field.number) {
        case 1: if (line.Expect(field, kVarint, "id")) id = static_cast<int64_t>(field.integer); break;
        case 10: if (line.Expect(field, kVarint, "display_id")) display_id = static_cast<int64_t>(field.integer); break;
        case 2: if (line.Expect(field, kLength, "name")) name = field.bytes; break;
        case 11: if (line.Expect(field, kLength, "display_name")) display_name = field.bytes; break;
        case 3: if (line.Expect(field, kVarint, "timestamp_ns")) timestamp_ns = static_cast<int64_t>(field.integer); break;
        case 4: line.Expect(field, kLength, "events"); break;
        default: break;
      }
    }
    XSPACE_CHECK(line);
    if (timestamp_ns >= kMaxTraceTimeNs || timestamp_ns <= -kMaxTraceTimeNs) {
      return Error(fmt::format("{}: line \"{}\": timestamp_ns {} is beyond the {} ns (about 146 years) a trace may span",
                               source_, EscapeForTerminal(TruncateUtf8(name, 80)), timestamp_ns, kMaxTraceTimeNs));
    }
    const int64_t tid = display_id != 0 ? display_id : id;
    const std::string_view shown = display_name.empty() ? name : display_name;
    // Tracks stay until the end: each costs its entry, so a file of millions of empty lines
    // (two bytes each) is refused before it costs many times its size.
    RETURN_IF_ERROR(TakeTrack(std::min<size_t>(shown.size(), 1000)));
    header_.threads.push_back({pid, tid, std::string(TruncateUtf8(shown, 1000)), static_cast<int64_t>(header_.threads.size())});
    const std::string line_category = LineCategory(name);
    // Pass 2: the events.
    Reader events = line.Fresh();
    while (events.Next(field)) {
      if (field.number != 4) continue;
      Reader event = events.Nested(field, "XEvent");
      RETURN_IF_ERROR(Event(event, pid, tid, timestamp_ns, line_category));
    }
    XSPACE_CHECK(events);
    return OkStatus();
  }

  Status Event(Reader& reader, int32_t pid, int64_t tid, int64_t timestamp_ns, const std::string& line_category);

  // One XStat into `args` (nothing for bytes, or without args wanted).
  Status Stat(Reader& reader, std::vector<TraceArg>& args, bool only_new) {
    Field field;
    int64_t metadata_id = 0;
    TraceArgValue value;
    bool has_value = false;
    while (reader.Next(field)) {
      switch (field.number) {
        case 1: if (reader.Expect(field, kVarint, "metadata_id")) metadata_id = static_cast<int64_t>(field.integer); break;
        case 2:
          if (reader.Expect(field, kFixed64, "double_value")) {
            double d;
            std::memcpy(&d, &field.integer, 8);
            value = d;
            has_value = true;
          }
          break;
        case 3:
        case 4:
          if (reader.Expect(field, kVarint, "an integer value")) {
            value = static_cast<int64_t>(field.integer);
            has_value = true;
          }
          break;
        case 5:
          if (reader.Expect(field, kLength, "str_value")) {
            value = std::string(field.bytes);
            has_value = true;
          }
          break;
        case 6: if (reader.Expect(field, kLength, "bytes_value")) has_value = false; break;
        case 7:
          if (reader.Expect(field, kVarint, "ref_value")) {
            auto it = stat_names_.find(static_cast<int64_t>(field.integer));
            value = std::string(it == stat_names_.end() ? std::string_view() : it->second);
            has_value = true;
          }
          break;
        default: break;
      }
    }
    XSPACE_CHECK(reader);
    if (!has_value) return OkStatus();
    auto it = stat_names_.find(metadata_id);
    std::string key = it != stat_names_.end() ? std::string(it->second) : fmt::format("stat {}", metadata_id);
    if (only_new) {
      for (const TraceArg& arg : args) {
        if (arg.key == key) return OkStatus();
      }
    }
    args.push_back({std::move(key), std::move(value)});
    return OkStatus();
  }

  void BindFlows() {
    if (!wants_flows_ || flow_points_.empty()) return;
    // A correlation id on exactly one host event and at least one device event is a launch.
    std::stable_sort(flow_points_.begin(), flow_points_.end(),
                     [](const FlowPoint& a, const FlowPoint& b) { return a.id < b.id; });
    for (size_t i = 0; i < flow_points_.size();) {
      size_t j = i;
      bool start = false, end = false;
      for (; j < flow_points_.size() && flow_points_[j].id == flow_points_[i].id; ++j) {
        (flow_points_[j].is_start ? start : end) = true;
      }
      if (start && end) {
        // (XSpace's launches and kernels are joined by correlation id, at their starts.)
        for (size_t k = i; k < j; ++k) {
          visitor_.OnFlow(flow_points_[k].ordinal, flow_points_[i].id, flow_points_[k].is_start, 0);
        }
      }
      i = j;
    }
  }

  struct FlowPoint {
    int64_t id;
    size_t ordinal;
    bool is_start;
  };

  std::string_view bytes_;
  const std::string& source_;
  ChromeTraceVisitor& visitor_;
  const bool wants_args_;
  const bool wants_flows_;
  ChromeTraceHeader header_;
  std::unordered_map<int64_t, EventMetadata> event_metadata_;
  std::unordered_map<int64_t, std::string_view> stat_names_;
  std::string_view plane_name_;
  bool device_plane_ = false;
  size_t retained_ = 0;
  size_t flow_bytes_ = 0;
  size_t track_bytes_ = 0;
  std::vector<FlowPoint> flow_points_;
  size_t ordinal_ = 0;
  int64_t missing_metadata_ = 0;
  int64_t aggregated_ = 0;
  TraceEvent event_;
};

Status XSpaceWalker::Event(Reader& reader, int32_t pid, int64_t tid, int64_t timestamp_ns,
                           const std::string& line_category) {
  Field field;
  int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
  bool aggregated = false;
  TraceEvent& event = event_;
  event.args.clear();
  while (reader.Next(field)) {
    switch (field.number) {
      case 1: if (reader.Expect(field, kVarint, "metadata_id")) metadata_id = static_cast<int64_t>(field.integer); break;
      case 2: if (reader.Expect(field, kVarint, "offset_ps")) offset_ps = static_cast<int64_t>(field.integer); break;
      case 5: if (reader.Expect(field, kVarint, "num_occurrences")) aggregated = true; break;
      case 3: if (reader.Expect(field, kVarint, "duration_ps")) duration_ps = static_cast<int64_t>(field.integer); break;
      case 4:
        // Read even when args are not wanted: they say whether the event is a kernel. Past
        // kMaxEventStats the rest are skipped, so one event cannot cost many times its bytes.
        if (reader.Expect(field, kLength, "stats") && event.args.size() < kMaxEventStats) {
          Reader stat = reader.Nested(field, "XStat");
          RETURN_IF_ERROR(Stat(stat, event.args, false));
        }
        break;
      default: break;
    }
  }
  XSPACE_CHECK(reader);
  if (aggregated) {
    ++aggregated_;
    return OkStatus();
  }
  auto metadata = event_metadata_.find(metadata_id);
  auto where = [&]() {
    return fmt::format("{}: plane \"{}\", line {}: event \"{}\"", source_,
                       EscapeForTerminal(TruncateUtf8(plane_name_, 80)), tid,
                       metadata == event_metadata_.end() ? fmt::format("(metadata {})", metadata_id)
                                                         : EscapeForTerminal(TruncateUtf8(metadata->second.name, 80)));
  };
  // Picoseconds to nanoseconds, rounded; both parts within ±2^62 ns, so the sum cannot overflow.
  const int64_t offset_ns = offset_ps / 1000 + (offset_ps % 1000 >= 500 ? 1 : offset_ps % 1000 <= -500 ? -1 : 0);
  if (offset_ns >= kMaxTraceTimeNs || offset_ns <= -kMaxTraceTimeNs || timestamp_ns + offset_ns >= kMaxTraceTimeNs ||
      timestamp_ns + offset_ns <= -kMaxTraceTimeNs) {
    return Error(fmt::format("{}: offset_ps {} puts it beyond the {} ns (about 146 years) a trace may span", where(),
                             offset_ps, kMaxTraceTimeNs));
  }
  if (duration_ps < 0) return Error(fmt::format("{}: duration_ps {} is negative", where(), duration_ps));
  event.start_ns = timestamp_ns + offset_ns;
  event.duration_ns = duration_ps / 1000 + (duration_ps % 1000 >= 500 ? 1 : 0);
  event.pid = pid;
  event.tid = tid;
  event.flow_in = event.flow_out = 0;
  if (metadata == event_metadata_.end()) {
    ++missing_metadata_;
    event.name = fmt::format("(event metadata {} missing)", metadata_id);
  } else {
    event.name.assign(metadata->second.name);
    for (std::string_view stat_bytes : metadata->second.stats) {
      Reader stat(stat_bytes, source_, "XEventMetadata.stats", 0);
      RETURN_IF_ERROR(Stat(stat, event.args, true));
    }
    std::string_view display = metadata->second.display_name;
    if (!display.empty() && display != metadata->second.name) event.args.push_back({"long_name", std::string(display)});
  }
  // The category: a line's own, else what its stats say it is.
  const TraceArg* hlo_op = FindArg(event, "hlo_op");
  if (!line_category.empty()) {
    event.category = line_category;
  } else if (device_plane_) {
    if (FindArg(event, "memcpy_details") != nullptr) event.category = category::kGpuMemcpy;
    else if (FindArg(event, "memset_details") != nullptr) event.category = category::kGpuMemset;
    else if (hlo_op != nullptr || FindArg(event, "kernel_details") != nullptr) event.category = category::kGpuKernel;
    else event.category.clear();
  } else {
    event.category = hlo_op != nullptr ? category::kCpuKernel : "";
  }
  if (wants_flows_) {
    const TraceArg* correlation = FindArg(event, "correlation_id");
    if (correlation != nullptr && std::holds_alternative<int64_t>(correlation->value)) {
      if (!Take(sizeof(FlowPoint))) return Exceeded();
      flow_bytes_ += sizeof(FlowPoint);
      flow_points_.push_back({std::get<int64_t>(correlation->value), ordinal_, !device_plane_});
    }
  }
  if (!wants_args_) {  // as the JSON reader: only what says which XLA kernel it is
    event.args.erase(std::remove_if(event.args.begin(), event.args.end(),
                                    [](const TraceArg& arg) { return arg.key != "hlo_op" && arg.key != "hlo_module"; }),
                     event.args.end());
  }
  ++ordinal_;
  visitor_.OnEvent(event);
  return OkStatus();
}

}  // namespace

bool LooksLikeXSpace(std::string_view head, std::string_view path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends_with(".pb")) return true;
  if (head.empty()) return false;
  auto json_start = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '{' || c == '['; };
  const unsigned char first = static_cast<unsigned char>(head[0]);
  // XSpace's fields 1 to 3 are length-delimited: keys 0x0a, 0x12, 0x1a (the hostnames' 0x22 is a
  // quote: left to the JSON reader, which names what is wrong with a top-level string). Only 0x0a
  // (a newline) can also start JSON; then the next byte is white space or a bracket, where XSpace
  // has a length and then one of XPlane's first keys (id, name, lines), which JSON never has there.
  if (first == 0x12 || first == 0x1a) return true;
  if (first != 0x0a || head.size() < 2) return false;
  if (!json_start(head[1])) return true;
  if (head.size() < 3) return false;
  const unsigned char third = static_cast<unsigned char>(head[2]);
  return third == 0x08 || third == 0x12 || third == 0x1a;
}

StatusOr<ChromeTraceHeader> StreamXSpaceBytes(std::string_view bytes, const std::string& source,
                                              ChromeTraceVisitor& visitor) {
  try {
    XSpaceWalker walker(bytes, source, visitor);
    return walker.Walk();
  } catch (const std::bad_alloc&) {
    return Error(fmt::format("{}: out of memory while reading the XSpace", source));
  }
}

StatusOr<ChromeTraceHeader> StreamXSpace(const std::string& path, ChromeTraceVisitor& visitor) {
  ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  MappedFile mapped;
  RETURN_IF_ERROR(mapped.Map(file));
  return StreamXSpaceBytes(mapped.bytes(), DisplayPath(path), visitor);
}

}  // namespace xlens::profiler
