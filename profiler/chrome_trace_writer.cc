#include "profiler/chrome_trace_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::profiler {

namespace {

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A buffered sink to an OutputFile, through gzip when asked. The first failure is kept and later
// writes are dropped, so the writer checks once at the end.
class TraceSink {
 public:
  Status Open(const std::string& path, bool gzip) {
    ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(path));
    file_.emplace(std::move(file));
    if (gzip) {
      // zlib owns (and closes) a duplicate; the OutputFile keeps its own descriptor to commit.
      int fd = ::dup(file_->fd());
      if (fd < 0) return Error(fmt::format("{}: cannot write: {}", DisplayPath(path), std::strerror(errno)));
      gz_ = gzdopen(fd, "wb6");
      if (gz_ == nullptr) {
        ::close(fd);
        return Error(fmt::format("{}: cannot start compressing: out of memory", DisplayPath(path)));
      }
    }
    buffer_.reserve(kFlushBytes + 4096);
    return OkStatus();
  }
  std::string& buffer() { return buffer_; }
  void MaybeFlush() {
    if (buffer_.size() >= kFlushBytes) Flush();
  }
  void Flush() {
    if (buffer_.empty() || !status_.ok()) return buffer_.clear();
    if (gz_ != nullptr) {
      if (gzwrite(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size())) != static_cast<int>(buffer_.size())) {
        int code = 0;
        const char* why = gzerror(gz_, &code);
        status_ = Error(fmt::format("{}: write failed: {}", DisplayPath(file_->path()),
                                    code == Z_ERRNO ? std::strerror(errno) : why));
      }
    } else {
      status_ = file_->Write(buffer_);
    }
    buffer_.clear();
  }
  // Flushes, finishes the gzip stream and commits the file (renamed into place, or written
  // through to a device). On an error the file is left as it was.
  Status Close() {
    Flush();
    if (gz_ != nullptr) {
      int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK && status_.ok()) {
        status_ = Error(fmt::format("{}: write failed: {}", DisplayPath(file_->path()),
                                    rc == Z_ERRNO ? std::strerror(errno) : "cannot finish the gzip stream"));
      }
    }
    if (!status_.ok()) return status_;  // the OutputFile's destructor removes its temporary
    return file_->Commit();
  }
  ~TraceSink() {
    if (gz_ != nullptr) gzclose(gz_);
  }

 private:
  static constexpr size_t kFlushBytes = 64 * 1024;
  std::optional<OutputFile> file_;
  gzFile gz_ = nullptr;
  std::string buffer_;
  Status status_;
};

void AppendString(std::string_view text, std::string& out) {
  out += '"';
  AppendJsonEscaped(text, out);
  out += '"';
}

void AppendNumber(double value, std::string& out) {
  // JSON has no NaN or infinity; null keeps the file loadable.
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  fmt::format_to(std::back_inserter(out), "{}", value);
}

void AppendArgValue(const TraceArgValue& value, std::string& out) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    fmt::format_to(std::back_inserter(out), "{}", *i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    AppendNumber(*d, out);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    AppendString(*s, out);
  } else {
    const auto& list = std::get<std::vector<int64_t>>(value);
    out += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out += ',';
      fmt::format_to(std::back_inserter(out), "{}", list[i]);
    }
    out += ']';
  }
}

void AppendArgs(const std::vector<TraceArg>& args, std::string& out) {
  out += '{';
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ',';
    AppendString(args[i].key, out);
    out += ':';
    AppendArgValue(args[i].value, out);
  }
  out += '}';
}

void AppendMetadataEvent(std::string_view name, int32_t pid, int64_t tid, std::string_view key,
                         const TraceArgValue& value, std::string& out) {
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":",
                 name, pid, tid, key);
  AppendArgValue(value, out);
  out += "}}";
}

void AppendFlow(char phase, int64_t id, const TraceEvent& event, int64_t at_ns, int64_t base_ns,
                std::string& out) {
  // Within the span, where a reader binds the point back to it: short of its end, where a span
  // that starts there on the same track would take the point.
  at_ns = std::clamp<int64_t>(at_ns, 0, std::max<int64_t>(0, event.duration_ns - 1));
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"{}\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":{},\"pid\":{},\"tid\":{},"
                 "\"ts\":{}{}}}",
                 phase, id, event.pid, event.tid, FormatMicros(event.start_ns + at_ns - base_ns),
                 phase == 'f' ? ",\"bp\":\"e\"" : "");
}

}  // namespace

std::string FormatMicros(int64_t ns) {
  uint64_t magnitude = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

void AppendJsonEscaped(std::string_view text, std::string& out) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = bytes[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // A well-formed UTF-8 sequence is copied; anything else becomes U+FFFD, byte by byte.
      size_t length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      bool valid = length > 0 && i + length <= n;
      for (size_t k = 1; valid && k < length; ++k) valid = (bytes[i + k] & 0xc0) == 0x80;
      if (valid && length == 3) {
        unsigned cp = ((c & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6);
        valid = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);  // no overlongs, no surrogates
      }
      if (valid && length == 4) {
        unsigned cp = ((c & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12);
        valid = cp >= 0x10000 && cp <= 0x10ffff;
      }
      if (valid) {
        out.append(text.substr(i, length));
        i += length;
      } else {
        out += "\xef\xbf\xbd";
        ++i;
      }
    }
  }
}

Status WriteChromeTrace(const Trace& trace, const std::string& path) {
  TraceSink sink;
  RETURN_IF_ERROR(sink.Open(path, EndsWith(path, ".gz")));
  std::string& out = sink.buffer();

  fmt::format_to(std::back_inserter(out),
                 "{{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":{},\n"
                 "\"distributedInfo\": {{\"rank\": 0, \"world_size\": 1, \"backend\": \"none\"}},\n"
                 "\"otherData\":",
                 trace.wall_base_ns != 0 ? trace.wall_base_ns : trace.base_ns);
  std::vector<TraceArg> other{{"producer", std::string("xlens")}};
  if (trace.wall_base_ns != 0) other.push_back({"steady_clock_base_ns", trace.base_ns});
  other.insert(other.end(), trace.metadata.begin(), trace.metadata.end());
  AppendArgs(other, out);
  out += ",\n\"traceEvents\":[\n";

  // Separators go before items, so the array never ends in a comma whatever was flushed.
  bool first = true;
  auto next_item = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const TraceProcess& process : trace.processes) {
    next_item();
    AppendMetadataEvent("process_name", process.pid, 0, "name", process.name, out);
    next_item();
    AppendMetadataEvent("process_sort_index", process.pid, 0, "sort_index", process.sort_index, out);
  }
  for (const TraceThread& thread : trace.threads) {
    next_item();
    AppendMetadataEvent("thread_name", thread.pid, thread.tid, "name", thread.name, out);
    next_item();
    AppendMetadataEvent("thread_sort_index", thread.pid, thread.tid, "sort_index",
                        thread.sort_index, out);
  }
  for (const TraceEvent& event : trace.events) {
    next_item();
    out += "{\"ph\":\"X\",\"cat\":";
    AppendString(event.category, out);
    out += ",\"name\":";
    AppendString(event.name, out);
    fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{}", event.pid,
                   event.tid, FormatMicros(event.start_ns - trace.base_ns),
                   FormatMicros(std::max<int64_t>(0, event.duration_ns)));
    if (!event.args.empty()) {
      out += ",\"args\":";
      AppendArgs(event.args, out);
    }
    out += "}";
    if (event.flow_out != 0) {
      next_item();
      AppendFlow('s', event.flow_out, event, event.flow_out_at_ns, trace.base_ns, out);
    }
    if (event.flow_in != 0) {
      next_item();
      AppendFlow('f', event.flow_in, event, event.flow_in_at_ns, trace.base_ns, out);
    }
    sink.MaybeFlush();
  }
  out += "\n]}\n";
  return sink.Close();
}

}  // namespace xlens::profiler
