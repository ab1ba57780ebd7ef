#include "dump/tar_archive.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

#ifdef XLENS_HAVE_LIBARCHIVE
#include <archive.h>
#include <archive_entry.h>
#endif

namespace xlens {

std::string_view TarMemberKindName(TarMemberKind kind) {
  switch (kind) {
    case TarMemberKind::kRegular: return "a regular file";
    case TarMemberKind::kDirectory: return "a directory";
    case TarMemberKind::kSymlink: return "a symbolic link";
    case TarMemberKind::kHardlink: return "a hard link";
    case TarMemberKind::kDevice: return "a device";
    case TarMemberKind::kFifo: return "a FIFO";
    case TarMemberKind::kOther: return "a special file";
  }
  return "a special file";
}

#ifndef XLENS_HAVE_LIBARCHIVE

namespace {
Status NoLibarchive() {
  return Error(
      "this xlens was built without libarchive, which bundles need (install libarchive-dev, as "
      "scripts/setup.sh does, and rebuild)");
}
}  // namespace

bool HaveTarGz() { return false; }
StatusOr<std::string> WriteTarGz(const std::vector<TarMember>&) { return NoLibarchive(); }
struct TarGzWriter::State {};
TarGzWriter::TarGzWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
TarGzWriter::~TarGzWriter() = default;
StatusOr<std::unique_ptr<TarGzWriter>> TarGzWriter::Open(Output) { return NoLibarchive(); }
Status TarGzWriter::Begin(const std::string&, int64_t) { return NoLibarchive(); }
Status TarGzWriter::Write(std::string_view) { return NoLibarchive(); }
Status TarGzWriter::Close() { return NoLibarchive(); }
Status ReadTarGz(const std::string&, const TarReadLimits&,
                 const std::function<Status(const TarHeader&)>&,
                 const std::function<StatusOr<std::unique_ptr<TarMemberSink>>(const TarHeader&)>&) {
  return NoLibarchive();
}

#else

namespace {

// Frees an archive handle however the function leaves.
struct ReadHandle {
  archive* a = archive_read_new();
  ~ReadHandle() { archive_read_free(a); }
};
struct WriteHandle {
  archive* a = archive_write_new();
  ~WriteHandle() { archive_write_free(a); }
};

std::string ArchiveError(archive* a) {
  const char* message = archive_error_string(a);
  return message == nullptr ? "unknown error" : EscapeForTerminal(TruncateUtf8(message, 300));
}

TarMemberKind KindOf(archive_entry* entry) {
  if (archive_entry_hardlink(entry) != nullptr) return TarMemberKind::kHardlink;
  switch (archive_entry_filetype(entry)) {
    case AE_IFREG: return TarMemberKind::kRegular;
    case AE_IFDIR: return TarMemberKind::kDirectory;
    case AE_IFLNK: return TarMemberKind::kSymlink;
    case AE_IFCHR:
    case AE_IFBLK: return TarMemberKind::kDevice;
    case AE_IFIFO: return TarMemberKind::kFifo;
    default: return TarMemberKind::kOther;
  }
}

}  // namespace

bool HaveTarGz() { return true; }

struct TarGzWriter::State {
  Output out;
  Status out_error;      // the first error `out` returned
  std::string member;    // being written, for messages
  int64_t left = 0;      // of its declared size
  bool closed = false;
  // Declared last, so freed first: freeing an archive that was not closed flushes it through
  // WriteOut, which needs the members above.
  WriteHandle handle;

  // The error of a libarchive call that failed: `out`'s own, if that is why.
  Status Failed(const std::string& doing) {
    if (!out_error.ok()) return out_error;
    return Error(fmt::format("{}: {}", doing, ArchiveError(handle.a)));
  }
};

namespace {

la_ssize_t WriteOut(archive*, void* client, const void* buffer, size_t length) {
  auto* state = static_cast<TarGzWriter::State*>(client);
  Status s = state->out(std::string_view(static_cast<const char*>(buffer), length));
  if (!s.ok()) {
    if (state->out_error.ok()) state->out_error = std::move(s);
    return -1;
  }
  return static_cast<la_ssize_t>(length);
}

}  // namespace

TarGzWriter::TarGzWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
TarGzWriter::~TarGzWriter() = default;

StatusOr<std::unique_ptr<TarGzWriter>> TarGzWriter::Open(Output out) {
  auto state = std::make_unique<State>();
  state->out = std::move(out);
  archive* a = state->handle.a;
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
      // No gzip name or time in the header: the same members give the same bytes.
      archive_write_set_filter_option(a, "gzip", "timestamp", nullptr) < ARCHIVE_WARN ||
      archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
      archive_write_open2(a, state.get(), nullptr, WriteOut, nullptr, nullptr) != ARCHIVE_OK) {
    return state->Failed("cannot start a .tar.gz");
  }
  return std::unique_ptr<TarGzWriter>(new TarGzWriter(std::move(state)));
}

Status TarGzWriter::Begin(const std::string& name, int64_t size) {
  State& s = *state_;
  archive_entry* entry = archive_entry_new();
  archive_entry_set_pathname_utf8(entry, name.c_str());
  archive_entry_set_filetype(entry, AE_IFREG);
  archive_entry_set_perm(entry, 0644);
  archive_entry_set_size(entry, static_cast<la_int64_t>(size));
  archive_entry_set_mtime(entry, 0, 0);
  const int status = archive_write_header(s.handle.a, entry);
  archive_entry_free(entry);
  s.member = name;
  s.left = size;
  if (status != ARCHIVE_OK) return s.Failed(fmt::format("cannot add {} to the archive", DisplayPath(name)));
  return OkStatus();
}

Status TarGzWriter::Write(std::string_view data) {
  State& s = *state_;
  if (static_cast<int64_t>(data.size()) > s.left) {
    return Error(fmt::format("cannot add {} to the archive: more data than the {} its header declared",
                             DisplayPath(s.member), FormatBytes(s.left)));
  }
  if (data.empty()) return OkStatus();
  if (archive_write_data(s.handle.a, data.data(), data.size()) != static_cast<la_ssize_t>(data.size())) {
    return s.Failed(fmt::format("cannot add {} to the archive", DisplayPath(s.member)));
  }
  s.left -= static_cast<int64_t>(data.size());
  return OkStatus();
}

Status TarGzWriter::Close() {
  State& s = *state_;
  if (s.closed) return OkStatus();
  s.closed = true;
  if (archive_write_close(s.handle.a) != ARCHIVE_OK) return s.Failed("cannot finish the archive");
  return OkStatus();
}

StatusOr<std::string> WriteTarGz(const std::vector<TarMember>& members) {
  std::string out;
  ASSIGN_OR_RETURN(std::unique_ptr<TarGzWriter> writer, TarGzWriter::Open([&out](std::string_view data) {
                     out.append(data);
                     return OkStatus();
                   }));
  for (const TarMember& member : members) {
    RETURN_IF_ERROR(writer->Begin(member.name, static_cast<int64_t>(member.contents.size())));
    RETURN_IF_ERROR(writer->Write(member.contents));
  }
  RETURN_IF_ERROR(writer->Close());
  return out;
}

Status ReadTarGz(const std::string& path, const TarReadLimits& limits,
                 const std::function<Status(const TarHeader&)>& check,
                 const std::function<StatusOr<std::unique_ptr<TarMemberSink>>(const TarHeader&)>& open) {
  // The file itself is opened by the project's reader: a regular file, within the input limit.
  ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  const std::string shown = DisplayPath(path);
  // The most all members' data may come to: the total limit, or less by the ratio.
  int64_t cap = limits.max_total_bytes;
  bool by_ratio = false;
  if (limits.max_ratio > 0) {
    const double allowed = std::max(static_cast<double>(limits.ratio_free_bytes),
                                    limits.max_ratio * static_cast<double>(file.size()));
    if (allowed < static_cast<double>(cap)) {
      cap = static_cast<int64_t>(allowed);
      by_ratio = true;
    }
  }
  auto too_big = [&](const std::string& what) {
    if (by_ratio) {
      return Error(fmt::format(
          "{}: {} expands past {}, {:g} times the archive's {} (the most a bundle may expand; a "
          "compression bomb?); refused before unpacking it",
          shown, what, FormatBytes(cap), limits.max_ratio, FormatBytes(file.size())));
    }
    return Error(fmt::format(
        "{}: {} expands past {} (the limit on what a bundle may unpack to; a compression "
        "bomb?); raise it with --max-input-size if the bundle is genuine",
        shown, what, FormatBytes(cap)));
  };
  ReadHandle handle;
  archive* a = handle.a;
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_none(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_fd(a, file.fd(), 64 * 1024) != ARCHIVE_OK) {
    return Error(fmt::format("{}: cannot be read as a .tar.gz: {}", shown, ArchiveError(a)));
  }
  int64_t total = 0, count = 0;
  std::string last = "the start";
  while (true) {
    archive_entry* entry = nullptr;
    int status = archive_read_next_header(a, &entry);
    if (status == ARCHIVE_EOF) break;
    if (status < ARCHIVE_WARN) {
      return Error(fmt::format("{}: damaged or truncated after {}: {}", shown, last,
                               ArchiveError(a)));
    }
    if (++count > limits.max_members) {
      return Error(fmt::format("{}: more than {} members (the most a bundle may hold); refused",
                               shown, limits.max_members));
    }
    TarHeader header;
    const char* name = archive_entry_pathname(entry);
    header.name = name == nullptr ? "" : name;
    header.kind = KindOf(entry);
    const char* link = archive_entry_hardlink(entry);
    if (link == nullptr) link = archive_entry_symlink(entry);
    if (link != nullptr) header.link_target = link;
    header.size = archive_entry_size(entry);
    last = fmt::format("member {}", DisplayPath(header.name));
    RETURN_IF_ERROR(check(header));
    if (header.kind != TarMemberKind::kRegular) continue;
    // What the header claims is refused before any of it is expanded.
    if (header.size < 0 || header.size > cap - total) return too_big(last);
    ASSIGN_OR_RETURN(std::unique_ptr<TarMemberSink> sink, open(header));
    int64_t written = 0;  // of this member
    static const std::string kZeros(64 * 1024, '\0');
    while (true) {
      const void* block = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      status = archive_read_data_block(a, &block, &size, &offset);
      if (status == ARCHIVE_EOF) break;
      if (status < ARCHIVE_WARN) {
        return Error(fmt::format("{}: damaged or truncated in {}: {}", shown, last,
                                 ArchiveError(a)));
      }
      if (offset < written) {
        return Error(fmt::format("{}: damaged in {}: its data goes back to offset {}", shown,
                                 last, static_cast<int64_t>(offset)));
      }
      // Sparse members place blocks at offsets: the gap counts as what it expands to.
      const int64_t end = static_cast<int64_t>(offset) + static_cast<int64_t>(size);
      if (end - written > cap - total) return too_big(last);
      total += end - written;
      while (written < offset) {
        const size_t gap = static_cast<size_t>(
            std::min<int64_t>(offset - written, static_cast<int64_t>(kZeros.size())));
        RETURN_IF_ERROR(sink->Write(std::string_view(kZeros.data(), gap)));
        written += static_cast<int64_t>(gap);
      }
      RETURN_IF_ERROR(sink->Write(std::string_view(static_cast<const char*>(block), size)));
      written = end;
    }
    RETURN_IF_ERROR(sink->Close());
  }
  return OkStatus();
}

#endif

}  // namespace xlens
