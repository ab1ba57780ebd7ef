// The bytes of a trace as the JSON parser reads them, a piece at a time, so that a trace is never
// held whole: plain text, or gzip (recognised by its magic bytes whatever the name; members
// written one after another are read one after another, as gzip does).
//
// Files are opened through InputFile (regular files only, at most MaxInputBytes()). Two limits keep
// a hostile file from costing unbounded memory or time, each stated in its message:
//   - the uncompressed text is at most MaxInputBytes() as well (the limit on input files, 2 GiB
//     unless --max-input-size or XLENS_MAX_INPUT_SIZE say otherwise), so a gzip bomb stops there;
//   - no token is longer than kMaxTokenBytes: a string, a number, or the spaces and brackets
//     between two of them. The JSON parser holds one token whole, so this bounds its memory.
// A read error, a corrupt or cut gzip stream and a limit all end the input early; status() says
// which, and the parser reports it instead of the syntax error the early end causes.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "compiler/support/file_io.h"
#include "compiler/support/status.h"

namespace xlens::profiler {

class TraceInputStream {
 public:
  static constexpr size_t kMaxTokenBytes = size_t{16} << 20;

  // A file; the error (no such file, not a regular file, too large) names it.
  static StatusOr<std::unique_ptr<TraceInputStream>> Open(const std::string& path);
  // Bytes in memory (text or gzip), named `source` in messages. They must outlive the stream.
  static std::unique_ptr<TraceInputStream> FromMemory(std::string_view bytes, std::string source);

  TraceInputStream(const TraceInputStream&) = delete;
  TraceInputStream& operator=(const TraceInputStream&) = delete;
  ~TraceInputStream();

  // An input iterator over the text, for nlohmann::json::sax_parse(begin(), end(), ...).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    explicit Iterator(TraceInputStream* stream) : stream_(stream) {}
    reference operator*() const { return *stream_->next_; }
    Iterator& operator++() {
      ++stream_->next_;
      return *this;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.AtEnd() == b.AtEnd(); }
    friend bool operator!=(const Iterator& a, const Iterator& b) { return !(a == b); }

   private:
    bool AtEnd() const { return stream_ == nullptr || (stream_->next_ == stream_->end_ && !stream_->Refill()); }
    TraceInputStream* stream_;
  };
  Iterator begin() { return Iterator(this); }
  Iterator end() { return Iterator(nullptr); }

  // The name for messages (escaped and shortened as DisplayPath does).
  const std::string& source() const { return source_; }
  // OK, or why the input ended before the end of the file.
  const Status& status() const { return status_; }
  // True once the whole input has been read without an error.
  bool finished() const { return finished_ && status_.ok(); }
  // True once a byte other than JSON white space has been read.
  bool saw_content() const { return saw_content_; }
  // Uncompressed bytes handed to the parser so far.
  uint64_t bytes_read() const { return piece_offset_ + static_cast<uint64_t>(next_ - piece_.get()); }
  // The 1-based line and column of the byte at `offset`, while it is in one of the last two
  // pieces read (the parser reports errors where it stands, so it always is).
  std::optional<std::pair<uint64_t, uint64_t>> LineAndColumn(uint64_t offset) const;

 private:
  static constexpr size_t kPieceBytes = size_t{1} << 16;

  TraceInputStream(std::string source, std::optional<InputFile> file, std::string_view memory);
  // Reads the next piece into piece_; false at the end of the input or on an error.
  bool Refill();
  // The next bytes of the file or of memory, before decompression.
  StatusOr<size_t> ReadRaw(char* data, size_t size);
  // The next uncompressed bytes; 0 at the end.
  StatusOr<size_t> ReadText(char* data, size_t size);
  StatusOr<size_t> Inflate(char* data, size_t size);
  // Checks the token limit over the new piece and counts its lines; on a violation cuts the
  // piece short before it.
  void Scan(size_t& size);
  // Ends the input at `at` in the piece: a token there is longer than kMaxTokenBytes.
  void TooLong(size_t& size, size_t at, const char* what);
  void Fail(Status status);

  std::string source_;
  std::optional<InputFile> file_;
  std::string_view memory_;

  // The raw bytes: z_.next_in and avail_in are where the parse stands in raw_, for gzip and also
  // for a plain file (what Open read to look for the magic bytes).
  bool gzip_ = false;
  bool inflating_ = false;  // z_ is initialised
  bool member_ended_ = false;
  z_stream z_{};
  std::unique_ptr<char[]> raw_;
  bool raw_eof_ = false;

  // The piece the parser reads and the one before it (for line numbers at a boundary).
  std::unique_ptr<char[]> piece_;
  std::unique_ptr<char[]> previous_;
  size_t previous_size_ = 0;
  uint64_t previous_offset_ = 0;
  const char* next_ = nullptr;
  const char* end_ = nullptr;
  uint64_t piece_offset_ = 0;
  size_t piece_size_ = 0;
  uint64_t piece_newlines_ = 0;
  size_t piece_last_newline_ = 0;
  // Newlines before each piece, and the offset just after the last of them.
  uint64_t lines_before_piece_ = 0, line_start_before_piece_ = 0;
  uint64_t lines_before_previous_ = 0, line_start_before_previous_ = 0;

  // The token scanner's state across pieces.
  bool in_string_ = false, escaped_ = false, in_bare_ = false;
  uint64_t token_bytes_ = 0;

  uint64_t limit_ = 0;
  Status status_;
  bool finished_ = false;
  bool saw_content_ = false;
};

}  // namespace xlens::profiler
