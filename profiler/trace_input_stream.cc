#include "profiler/trace_input_stream.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens::profiler {

namespace {

// The index of the first '"' or '\\' at or after `i`, or `size`: eight bytes at a time, as
// strings are most of a trace and most are short (a call to memchr costs more than they do).
size_t SkipStringBytes(const char* data, size_t i, size_t size) {
  constexpr uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  auto has = [](uint64_t word, uint64_t byte) {
    uint64_t x = word ^ (kOnes * byte);
    return (x - kOnes) & ~x & kHighs;
  };
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    if (has(word, '"') | has(word, '\\')) break;
  }
  while (i < size && data[i] != '"' && data[i] != '\\') ++i;
  return i;
}

bool IsGzipMagic(const char* data, size_t size) {
  return size >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

}  // namespace

TraceInputStream::TraceInputStream(std::string source, std::optional<InputFile> file, std::string_view memory)
    : source_(std::move(source)),
      file_(std::move(file)),
      memory_(memory),
      raw_(new char[kPieceBytes]),
      piece_(new char[kPieceBytes]),
      previous_(new char[kPieceBytes]),
      limit_(static_cast<uint64_t>(std::max<int64_t>(0, MaxInputBytes()))) {
  next_ = end_ = piece_.get();
}

TraceInputStream::~TraceInputStream() {
  if (inflating_) inflateEnd(&z_);
}

StatusOr<std::unique_ptr<TraceInputStream>> TraceInputStream::Open(const std::string& path) {
  ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  std::unique_ptr<TraceInputStream> stream(new TraceInputStream(DisplayPath(path), std::move(file), {}));
  // The first bytes say whether it is gzip.
  ASSIGN_OR_RETURN(size_t n, stream->ReadRaw(stream->raw_.get(), kPieceBytes));
  stream->z_.next_in = reinterpret_cast<Bytef*>(stream->raw_.get());
  stream->z_.avail_in = static_cast<uInt>(n);
  if (IsGzipMagic(stream->raw_.get(), n)) {
    stream->gzip_ = true;
    if (inflateInit2(&stream->z_, 16 + MAX_WBITS) != Z_OK) {
      return Error(fmt::format("{}: cannot start decompressing: out of memory", stream->source_));
    }
    stream->inflating_ = true;
  }
  return stream;
}

std::unique_ptr<TraceInputStream> TraceInputStream::FromMemory(std::string_view bytes, std::string source) {
  std::unique_ptr<TraceInputStream> stream(
      new TraceInputStream(EscapeForTerminal(TruncateUtf8(source, 200)), std::nullopt, bytes));
  if (IsGzipMagic(bytes.data(), bytes.size())) {
    stream->gzip_ = true;
    stream->inflating_ = inflateInit2(&stream->z_, 16 + MAX_WBITS) == Z_OK;
    if (!stream->inflating_) stream->Fail(Error(fmt::format("{}: cannot start decompressing", stream->source_)));
  }
  return stream;
}

void TraceInputStream::Fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

StatusOr<size_t> TraceInputStream::ReadRaw(char* data, size_t size) {
  if (file_.has_value()) return file_->Read(data, size);
  size_t n = std::min(size, memory_.size());
  std::memcpy(data, memory_.data(), n);
  memory_.remove_prefix(n);
  return n;
}

StatusOr<size_t> TraceInputStream::ReadText(char* data, size_t size) {
  if (gzip_) return Inflate(data, size);
  if (z_.avail_in > 0) {  // what Open read to look for the magic bytes
    size_t n = std::min<size_t>(size, z_.avail_in);
    std::memcpy(data, z_.next_in, n);
    z_.next_in += n;
    z_.avail_in -= static_cast<uInt>(n);
    return n;
  }
  return ReadRaw(data, size);
}

StatusOr<size_t> TraceInputStream::Inflate(char* data, size_t size) {
  auto fill = [&]() -> Status {
    if (z_.avail_in > 0 || raw_eof_) return OkStatus();
    ASSIGN_OR_RETURN(size_t n, ReadRaw(raw_.get(), kPieceBytes));
    raw_eof_ = n == 0;
    z_.next_in = reinterpret_cast<Bytef*>(raw_.get());
    z_.avail_in = static_cast<uInt>(n);
    return OkStatus();
  };
  for (;;) {
    if (member_ended_) {
      // Another member may follow; anything else after a member is ignored, as gzip does.
      RETURN_IF_ERROR(fill());
      if (z_.avail_in == 0 || z_.next_in[0] != 0x1f) return size_t{0};
      if (inflateReset(&z_) != Z_OK) return Error(fmt::format("{}: cannot decompress", source_));
      member_ended_ = false;
    }
    RETURN_IF_ERROR(fill());
    if (z_.avail_in == 0) {
      return Error(fmt::format("{}: the gzip stream is cut short (the file ends inside it)", source_));
    }
    z_.next_out = reinterpret_cast<Bytef*>(data);
    z_.avail_out = static_cast<uInt>(size);
    int rc = inflate(&z_, Z_NO_FLUSH);
    size_t produced = size - z_.avail_out;
    if (rc == Z_STREAM_END) {
      member_ended_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return Error(fmt::format("{}: not a valid gzip stream: {}", source_,
                               z_.msg != nullptr ? z_.msg : fmt::format("zlib error {}", rc)));
    }
    if (produced > 0) return produced;
  }
}

bool TraceInputStream::Refill() {
  if (!status_.ok() || finished_) return false;
  // Read into the spare buffer first: at the end, the last piece stays for line numbers.
  StatusOr<size_t> read = ReadText(previous_.get(), kPieceBytes);
  if (!read.ok()) {
    Fail(read.status());
    return false;
  }
  size_t n = *read;
  if (n == 0) {
    finished_ = true;
    return false;
  }
  previous_offset_ = piece_offset_;
  previous_size_ = piece_size_;
  lines_before_previous_ = lines_before_piece_;
  line_start_before_previous_ = line_start_before_piece_;
  piece_offset_ += piece_size_;
  lines_before_piece_ += piece_newlines_;
  if (piece_newlines_ > 0) line_start_before_piece_ = previous_offset_ + piece_last_newline_ + 1;
  std::swap(piece_, previous_);
  piece_size_ = n;
  next_ = end_ = piece_.get();
  if (piece_offset_ + n > limit_) {
    Fail(Error(fmt::format("{}: {} more than {}, the limit on input files (raise it with --max-input-size=SIZE "
                           "or XLENS_MAX_INPUT_SIZE)",
                           source_, gzip_ ? "uncompresses to" : "is", FormatBytes(static_cast<int64_t>(limit_)))));
    piece_size_ = 0;
    return false;
  }
  Scan(piece_size_);
  end_ = next_ + piece_size_;
  return piece_size_ > 0;
}

void TraceInputStream::Scan(size_t& size) {
  const char* data = piece_.get();
  size_t i = 0;
  while (i < size) {
    if (in_string_) {
      // Most bytes are inside strings: on to the closing quote, stepping over escapes.
      size_t start = i;
      if (escaped_) {
        escaped_ = false;
        ++i;
      }
      while (i < size) {
        i = SkipStringBytes(data, i, size);
        if (i == size) break;
        if (data[i] == '"') {
          in_string_ = false;
          ++i;
          break;
        }
        i += 2;  // a backslash and the byte it escapes
        if (i > size) {
          escaped_ = true;
          i = size;
        }
      }
      uint64_t before = token_bytes_;
      token_bytes_ += i - start;
      if (token_bytes_ > kMaxTokenBytes) {
        TooLong(size, start + static_cast<size_t>(kMaxTokenBytes - before), "a string");
        break;
      }
      continue;
    }
    switch (data[i]) {
      case '"':
        in_string_ = true;
        in_bare_ = false;
        token_bytes_ = 1;
        saw_content_ = true;
        ++i;
        continue;  // the string's bytes are counted above
      case '\n':
      case ' ':
      case '\t':
      case '\r': in_bare_ = false; break;
      case '[':
      case ']':
      case '{':
      case '}':
      case ',':
      case ':':
        in_bare_ = false;
        saw_content_ = true;
        break;
      default:  // a number or a literal (or a byte the parser will refuse)
        if (!in_bare_) token_bytes_ = 0;
        in_bare_ = true;
        saw_content_ = true;
    }
    ++i;
    if (++token_bytes_ > kMaxTokenBytes) {
      TooLong(size, i - 1, in_bare_ ? "a number or literal" : "a run of white space and brackets");
      break;
    }
  }
  piece_newlines_ = static_cast<uint64_t>(std::count(data, data + size, '\n'));
  for (size_t k = size; piece_newlines_ > 0 && k-- > 0;) {
    if (data[k] == '\n') {
      piece_last_newline_ = k;
      break;
    }
  }
}

void TraceInputStream::TooLong(size_t& size, size_t at, const char* what) {
  std::string where;
  if (auto position = LineAndColumn(piece_offset_ + at)) where = fmt::format(":{}:{}", position->first, position->second);
  Fail(Error(fmt::format("{}{}: {} longer than {}: a trace has none, and reading it would hold it whole", source_,
                         where, what, FormatBytes(kMaxTokenBytes))));
  size = at;
}

std::optional<std::pair<uint64_t, uint64_t>> TraceInputStream::LineAndColumn(uint64_t offset) const {
  auto locate = [offset](const char* data, uint64_t start, uint64_t lines_before, uint64_t line_start) {
    uint64_t line = lines_before + 1;
    for (uint64_t i = 0; start + i < offset; ++i) {
      if (data[i] == '\n') {
        ++line;
        line_start = start + i + 1;
      }
    }
    return std::make_pair(line, offset - line_start + 1);
  };
  if (offset >= piece_offset_ && offset <= piece_offset_ + piece_size_) {
    return locate(piece_.get(), piece_offset_, lines_before_piece_, line_start_before_piece_);
  }
  if (previous_size_ > 0 && offset >= previous_offset_ && offset < piece_offset_) {
    return locate(previous_.get(), previous_offset_, lines_before_previous_, line_start_before_previous_);
  }
  return std::nullopt;
}

}  // namespace xlens::profiler
