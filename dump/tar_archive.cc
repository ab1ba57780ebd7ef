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

la_ssize_t AppendToString(archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
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

StatusOr<std::string> WriteTarGz(const std::vector<TarMember>& members) {
  WriteHandle handle;
  archive* a = handle.a;
  std::string out;
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
      // No gzip name or time in the header: the same members give the same bytes.
      archive_write_set_filter_option(a, "gzip", "timestamp", nullptr) < ARCHIVE_WARN ||
      archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
      archive_write_open2(a, &out, nullptr, AppendToString, nullptr, nullptr) != ARCHIVE_OK) {
    return Error(fmt::format("cannot start a .tar.gz: {}", ArchiveError(a)));
  }
  for (const TarMember& member : members) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname_utf8(entry, member.name.c_str());
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    archive_entry_set_size(entry, static_cast<la_int64_t>(member.contents.size()));
    archive_entry_set_mtime(entry, 0, 0);
    int status = archive_write_header(a, entry);
    archive_entry_free(entry);
    if (status != ARCHIVE_OK) {
      return Error(fmt::format("cannot add {} to the archive: {}", DisplayPath(member.name),
                               ArchiveError(a)));
    }
    if (!member.contents.empty() &&
        archive_write_data(a, member.contents.data(), member.contents.size()) !=
            static_cast<la_ssize_t>(member.contents.size())) {
      return Error(fmt::format("cannot add {} to the archive: {}", DisplayPath(member.name),
                               ArchiveError(a)));
    }
  }
  if (archive_write_close(a) != ARCHIVE_OK) {
    return Error(fmt::format("cannot finish the archive: {}", ArchiveError(a)));
  }
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
