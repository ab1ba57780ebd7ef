#include "profiler/chrome_trace_parser.h"

#include <cstdint>
#include <new>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_writer.h"

namespace xlens::profiler {

namespace {

// Nested values inside an arg are kept as text down to this depth, then "...".
constexpr int kMaxArgTextDepth = 16;

enum class Frame : uint8_t {
  kTopObject,  // the document's object
  kEventList,  // "traceEvents", or the document in the array form
  kEvent,      // one element of the list
  kArgs,       // an event's "args" or "otherData": members become TraceArgs
  kArgValue,   // a list or object inside an arg, kept as text
  kSkip,       // a value nobody reads
};

enum class Field : uint8_t { kOther, kPh, kName, kCat, kPid, kTid, kTs, kDur, kId, kArgs };
enum class TopKey : uint8_t { kOther, kTraceEvents, kBaseTime, kOtherData };

Field FieldOf(std::string_view key) {
  if (key.size() > 4) return Field::kOther;
  if (key == "ph") return Field::kPh;
  if (key == "name") return Field::kName;
  if (key == "cat") return Field::kCat;
  if (key == "pid") return Field::kPid;
  if (key == "tid") return Field::kTid;
  if (key == "ts") return Field::kTs;
  if (key == "dur") return Field::kDur;
  if (key == "id") return Field::kId;
  if (key == "args") return Field::kArgs;
  return Field::kOther;
}

TopKey TopKeyOf(std::string_view key) {
  if (key == "traceEvents") return TopKey::kTraceEvents;
  if (key == "baseTimeNanoseconds") return TopKey::kBaseTime;
  if (key == "otherData") return TopKey::kOtherData;
  return TopKey::kOther;
}

TraceArgValue ArgValueOf(JsonScalar& value) {
  switch (value.kind) {
    case JsonKind::kInteger:
    case JsonKind::kBoolean: return value.integer;
    case JsonKind::kUnsigned: return static_cast<int64_t>(value.unsigned_);
    case JsonKind::kFloat: return value.number;
    case JsonKind::kString: return std::move(value.text);
    default: return std::string("null");
  }
}

// The SAX handler nlohmann's parser calls. A false return stops the parse; status_ says why.
class Handler {
 public:
  Handler(TraceInputStream& input, RawTraceConsumer& consumer)
      : input_(input), consumer_(consumer), wants_args_(consumer.WantsArgs()) {
    stack_.reserve(kMaxNestingDepth);
  }

  const Status& status() const { return status_; }
  bool accepted_cut_off() const { return accepted_cut_off_; }

  bool null() { return Scalar(JsonKind::kNull); }
  bool boolean(bool value) {
    scalar_.integer = value;
    return Scalar(JsonKind::kBoolean);
  }
  bool number_integer(int64_t value) {
    scalar_.integer = value;
    return Scalar(JsonKind::kInteger);
  }
  bool number_unsigned(uint64_t value) {
    if (value <= static_cast<uint64_t>(INT64_MAX)) return number_integer(static_cast<int64_t>(value));
    scalar_.unsigned_ = value;
    return Scalar(JsonKind::kUnsigned);
  }
  bool number_float(double value, const std::string& text) {
    scalar_.number = value;
    scalar_.text = text;
    return Scalar(JsonKind::kFloat);
  }
  bool string(std::string& value) {
    scalar_.text.swap(value);  // the lexer gets a buffer back: no allocation per string
    return Scalar(JsonKind::kString);
  }
  bool binary(nlohmann::json::binary_t&) { return true; }  // JSON text has none
  bool start_object(size_t) { return Open(JsonKind::kObject); }
  bool start_array(size_t) { return Open(JsonKind::kArray); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& key);
  bool parse_error(size_t position, const std::string& last_token, const nlohmann::detail::exception& error);

 private:
  struct Level {
    Frame frame;
    bool is_object;
    bool first = true;  // no member written yet (kArgValue)
  };

  bool Scalar(JsonKind kind);
  bool Open(JsonKind kind);
  bool Close();
  // Places a value (a scalar in scalar_, or the start of a list or object) where the parse
  // stands: returns the frame to push for a list or object.
  bool Place(JsonKind kind, Frame* push);
  void AppendArgText(JsonKind kind);
  bool FinishArg(TraceArgValue value);
  bool Fail(std::string message) {
    if (status_.ok()) status_ = Error(std::move(message));
    return false;
  }
  // "event 3: " inside an event, "" elsewhere.
  std::string EventPrefix() const {
    return in_event_ ? fmt::format("event {}: ", event_.index) : std::string();
  }
  std::string Where(size_t offset) const {
    auto position = input_.LineAndColumn(offset);
    return position ? fmt::format("{}:{}:{}", input_.source(), position->first, position->second) : input_.source();
  }

  TraceInputStream& input_;
  RawTraceConsumer& consumer_;
  const bool wants_args_;
  Status status_;
  bool accepted_cut_off_ = false;

  std::vector<Level> stack_;
  bool array_form_ = false;
  bool saw_events_ = false;
  TopKey top_key_ = TopKey::kOther;
  Field field_ = Field::kOther;
  std::string last_key_;  // for messages

  JsonScalar scalar_;
  bool in_event_ = false;
  RawTraceEvent event_;
  size_t next_index_ = 0;
  bool args_are_other_data_ = false;

  // The arg being read: its key, and when it is a list or object, its text and (for a flat
  // list of integers) its values.
  std::string arg_key_;
  size_t arg_depth_ = 0;  // stack size when the arg's list or object opened
  std::string arg_text_;
  std::vector<int64_t> arg_integers_;
  bool arg_all_integers_ = false;
};

bool Handler::key(std::string& key) {
  Level& top = stack_.back();
  switch (top.frame) {
    case Frame::kTopObject: top_key_ = TopKeyOf(key); break;
    case Frame::kEvent: field_ = FieldOf(key); break;
    case Frame::kArgs: arg_key_ = key; break;
    case Frame::kArgValue:
      if (!top.first) arg_text_ += ',';
      top.first = false;
      arg_text_ += '"';
      AppendJsonEscaped(key, arg_text_);
      arg_text_ += "\":";
      break;
    default: break;
  }
  if (top.frame != Frame::kSkip) last_key_ = key;
  return true;
}

bool Handler::Scalar(JsonKind kind) {
  scalar_.kind = kind;
  return Place(kind, nullptr);
}

bool Handler::Open(JsonKind kind) {
  if (stack_.size() >= static_cast<size_t>(kMaxNestingDepth)) {
    return Fail(fmt::format("{}: {}nested deeper than {} levels: not a trace", Where(input_.bytes_read() - 1),
                            EventPrefix(), kMaxNestingDepth));
  }
  Frame frame = Frame::kSkip;
  scalar_.kind = kind;  // what a field that expected a scalar found
  if (!Place(kind, &frame)) return false;
  stack_.push_back({frame, kind == JsonKind::kObject});
  if (frame == Frame::kArgValue) arg_text_ += kind == JsonKind::kObject ? '{' : '[';
  return true;
}

bool Handler::Place(JsonKind kind, Frame* push) {
  const bool container = kind == JsonKind::kArray || kind == JsonKind::kObject;
  if (stack_.empty()) {  // the document
    if (kind == JsonKind::kObject) {
      *push = Frame::kTopObject;
      return true;
    }
    if (kind == JsonKind::kArray) {
      array_form_ = saw_events_ = true;
      *push = Frame::kEventList;
      return true;
    }
    return Fail(fmt::format("{}: expected a JSON object with \"traceEvents\" or a list of events, not {}",
                            input_.source(), JsonKindName(kind)));
  }
  Level& top = stack_.back();
  switch (top.frame) {
    case Frame::kTopObject:
      switch (top_key_) {
        case TopKey::kTraceEvents:
          if (kind != JsonKind::kArray) {
            return Fail(fmt::format("{}: \"traceEvents\" must be a list, not {}", input_.source(), JsonKindName(kind)));
          }
          saw_events_ = true;
          *push = Frame::kEventList;
          return true;
        case TopKey::kBaseTime:
          if (Status status = consumer_.OnBaseTime(scalar_); !status.ok()) return Fail(status.message());
          break;
        case TopKey::kOtherData:
          if (kind == JsonKind::kObject) {
            args_are_other_data_ = true;
            *push = Frame::kArgs;
            return true;
          }
          break;
        case TopKey::kOther: break;
      }
      return true;  // a scalar read, or a list or object skipped
    case Frame::kEventList:
      if (kind != JsonKind::kObject) {
        return Fail(fmt::format("{}: event {}: expected an object, not {}", input_.source(), next_index_++,
                                JsonKindName(kind)));
      }
      in_event_ = true;
      event_.index = next_index_++;
      for (JsonScalar* field : {&event_.ph, &event_.name, &event_.cat, &event_.pid, &event_.tid, &event_.ts,
                                &event_.dur, &event_.id}) {
        field->kind = JsonKind::kAbsent;
      }
      event_.args.clear();
      *push = Frame::kEvent;
      return true;
    case Frame::kEvent: {
      JsonScalar* field = nullptr;
      switch (field_) {
        case Field::kPh: field = &event_.ph; break;
        case Field::kName: field = &event_.name; break;
        case Field::kCat: field = &event_.cat; break;
        case Field::kPid: field = &event_.pid; break;
        case Field::kTid: field = &event_.tid; break;
        case Field::kTs: field = &event_.ts; break;
        case Field::kDur: field = &event_.dur; break;
        case Field::kId: field = &event_.id; break;
        case Field::kArgs:
          // Read even when args are not wanted, for the two that say an event is XLA's kernel
          // and of which module (hlo_op, hlo_module); FinishArg drops the others.
          if (kind == JsonKind::kObject) {
            event_.args.clear();  // a repeated "args": the last one counts
            args_are_other_data_ = false;
            *push = Frame::kArgs;
          }
          return true;
        case Field::kOther: return true;
      }
      if (container) {
        field->kind = kind;
      } else {
        std::swap(*field, scalar_);
      }
      return true;
    }
    case Frame::kArgs:
      if (!container) return FinishArg(ArgValueOf(scalar_));
      if (!wants_args_) return true;  // otherData's lists and objects, for a reader that needs none
      arg_depth_ = stack_.size() + 1;
      arg_text_.clear();
      arg_integers_.clear();
      arg_all_integers_ = kind == JsonKind::kArray;
      *push = Frame::kArgValue;
      return true;
    case Frame::kArgValue:
      if (!top.is_object) {
        if (!top.first) arg_text_ += ',';
        top.first = false;
      }
      if (stack_.size() == arg_depth_ && (kind == JsonKind::kInteger || kind == JsonKind::kUnsigned)) {
        arg_integers_.push_back(kind == JsonKind::kInteger ? scalar_.integer : static_cast<int64_t>(scalar_.unsigned_));
      } else {
        arg_all_integers_ = false;
      }
      if (!container) {
        AppendArgText(kind);
      } else if (stack_.size() - arg_depth_ + 1 > static_cast<size_t>(kMaxArgTextDepth)) {
        arg_text_ += "...";
      } else {
        *push = Frame::kArgValue;
      }
      return true;
    case Frame::kSkip: return true;
  }
  return true;
}

void Handler::AppendArgText(JsonKind kind) {
  switch (kind) {
    case JsonKind::kNull: arg_text_ += "null"; break;
    case JsonKind::kBoolean: arg_text_ += scalar_.integer ? "true" : "false"; break;
    case JsonKind::kInteger: fmt::format_to(std::back_inserter(arg_text_), "{}", scalar_.integer); break;
    case JsonKind::kUnsigned: fmt::format_to(std::back_inserter(arg_text_), "{}", scalar_.unsigned_); break;
    case JsonKind::kFloat: arg_text_ += scalar_.text; break;
    case JsonKind::kString:
      arg_text_ += '"';
      AppendJsonEscaped(scalar_.text, arg_text_);
      arg_text_ += '"';
      break;
    default: break;
  }
}

bool Handler::FinishArg(TraceArgValue value) {
  if (!wants_args_ && !args_are_other_data_) {
    // What an XLA kernel is, what a collective waited for (the summary's per-device lines), and
    // the names of processes and threads (metadata events' "name").
    if (arg_key_ != "hlo_op" && arg_key_ != "hlo_module" && arg_key_ != "wait_ns" &&
        arg_key_ != "last_arrival" && arg_key_ != "bytes" && arg_key_ != "name" &&
        arg_key_ != "sort_index") {
      return true;
    }
    // At most these few, however often a hostile event repeats them: the last counts.
    for (TraceArg& arg : event_.args) {
      if (arg.key == arg_key_) {
        arg.value = std::move(value);
        return true;
      }
    }
  }
  if (args_are_other_data_) {
    consumer_.OnOtherData({std::move(arg_key_), std::move(value)});
  } else {
    event_.args.push_back({std::move(arg_key_), std::move(value)});
  }
  return true;
}

bool Handler::Close() {
  Level level = stack_.back();
  stack_.pop_back();
  switch (level.frame) {
    case Frame::kTopObject:
      if (!saw_events_) {
        return Fail(fmt::format("{}: expected a \"traceEvents\" list in the top-level object", input_.source()));
      }
      return true;
    case Frame::kEvent: {
      in_event_ = false;
      Status status = consumer_.OnEvent(event_);
      if (!status.ok()) return Fail(status.message());
      return true;
    }
    case Frame::kArgValue:
      arg_text_ += level.is_object ? '}' : ']';
      if (stack_.size() + 1 == arg_depth_) {
        if (arg_all_integers_) return FinishArg(std::move(arg_integers_));
        return FinishArg(std::move(arg_text_));
      }
      return true;
    default: return true;
  }
}

bool Handler::parse_error(size_t position, const std::string& last_token, const nlohmann::detail::exception& error) {
  // An input that ended early (a read error, a cut gzip stream, a limit) says why itself.
  if (!input_.status().ok()) return Fail(input_.status().message());
  std::string what = error.what();
  bool at_end = input_.finished() && what.find("unexpected end of input") != std::string::npos;
  if (at_end && !input_.saw_content()) {
    return Fail(fmt::format("{}: empty file, expected a Chrome trace (JSON)", input_.source()));
  }
  // Chrome's array form may end without its "]" (a trace cut off while recording), after a
  // whole event.
  if (at_end && array_form_ && stack_.size() == 1) {
    accepted_cut_off_ = true;
    return false;
  }
  std::string where = Where(position == 0 ? 0 : position - 1);
  if (error.id == 406) {  // a number beyond a double's range; `position` is just after it
    where = Where(position >= last_token.size() ? position - last_token.size() : 0);
    return Fail(fmt::format("{}: {}{}number out of range: {}", where, EventPrefix(),
                            last_key_.empty() ? "" : fmt::format("\"{}\": ", EscapeForTerminal(TruncateUtf8(last_key_, 80))),
                            EscapeForTerminal(TruncateUtf8(last_token, 80))));
  }
  // nlohmann's text is "[json.exception.parse_error.101] parse error at line ..., column ...:
  // syntax error while parsing value - invalid literal; last read: '...'": keep the reason.
  size_t start = what.find("syntax error");
  if (start == std::string::npos) start = what.find(": ");
  std::string reason = start == std::string::npos ? what : what.substr(start);
  if (reason.rfind(": ", 0) == 0) reason = reason.substr(2);
  std::string shown = EscapeForTerminal(TruncateUtf8(reason, 200));
  if (shown.size() < reason.size()) shown += "...";
  return Fail(fmt::format("{}: {}not valid JSON: {}", where, EventPrefix(), shown));
}

}  // namespace

const char* JsonKindName(JsonKind kind) {
  switch (kind) {
    case JsonKind::kAbsent: return "nothing";
    case JsonKind::kNull: return "null";
    case JsonKind::kBoolean: return "boolean";
    case JsonKind::kInteger:
    case JsonKind::kUnsigned:
    case JsonKind::kFloat: return "number";
    case JsonKind::kString: return "string";
    case JsonKind::kArray: return "array";
    case JsonKind::kObject: return "object";
  }
  return "?";
}

Status ParseChromeTraceJson(TraceInputStream& input, RawTraceConsumer& consumer) {
  Handler handler(input, consumer);
  try {
    nlohmann::json::sax_parse(input.begin(), input.end(), &handler);
  } catch (const std::bad_alloc&) {
    return Error(fmt::format("{}: out of memory while reading the trace", input.source()));
  } catch (const std::exception& error) {
    return Error(fmt::format("{}: cannot read: {}", input.source(), EscapeForTerminal(TruncateUtf8(error.what(), 200))));
  }
  if (!handler.status().ok()) return handler.status();
  // A value that ends just before a read error parses; the error still counts.
  if (!input.status().ok()) return input.status();
  return OkStatus();
}

}  // namespace xlens::profiler
