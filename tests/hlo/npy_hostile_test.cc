// Hostile .npy files, crafted here rather than stored: every truncation and many byte mutations of
// valid files, headers that lie about the data, headers built to exhaust the parser, and special
// files where a .npy file should be. Whatever the bytes, the reader answers with a literal that
// holds exactly what the file holds, or with one line that names the file: no crash, no hang, no
// raw control character or broken UTF-8 from the file reaching the terminal. (npy_test.cc holds
// the corpus of named broken headers and their messages; this file holds the mass-produced ones.)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/npy.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "scratch_directory.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kLongestMessage = 1000;

using ::xlens::testing::FreshScratchDir;

// A .npy file of `major` version around the header text `dict` (no alignment: the reader must
// not need it).
std::string NpyFile(const std::string& dict, const std::string& data = "", int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const uint64_t n = dict.size();
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + dict + data;
}

std::string Dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }\n";
}

// A refusal as a user sees it: one line, starting with the file's name, short, and made only of
// printable valid UTF-8 (what the file said reaches the terminal escaped).
void ExpectOneCleanLine(const Status& status, const std::string& name) {
  const std::string& message = status.message();
  EXPECT_THAT(message, StartsWith(name + ": "));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LE(message.size(), kLongestMessage) << message.substr(0, 200);
  EXPECT_EQ(EscapeForTerminal(message), message) << "raw control bytes or invalid UTF-8";
}

// Parses `bytes`; a literal must hold what the file holds and survive a round trip, a refusal
// must be one clean line.
void ExpectLiteralOrCleanError(const std::string& bytes, const std::string& name) {
  StatusOr<Literal> literal = ParseNpy(bytes, name);
  if (!literal.ok()) {
    ExpectOneCleanLine(literal.status(), name);
    return;
  }
  // The header cannot promise more elements than the data holds.
  EXPECT_LE(literal->size_bytes(), bytes.size()) << name;
  StatusOr<std::string> again = SerializeNpy(*literal);
  ASSERT_TRUE(again.ok()) << again.status().message();
  StatusOr<Literal> reparsed = ParseNpy(*again, name);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  EXPECT_TRUE(*reparsed == *literal) << name;
}

// Valid files of several element types, ranks and header versions.
std::vector<std::pair<std::string, std::string>> ValidFiles() {
  std::string f32_2x3(24, '\0');
  for (int i = 0; i < 6; ++i) {
    float v = static_cast<float>(i) - 2.5f;
    std::memcpy(&f32_2x3[4 * i], &v, 4);
  }
  return {
      {"f32_2x3", NpyFile(Dict("<f4", "(2, 3)"), f32_2x3)},
      {"s64_scalar", NpyFile(Dict("<i8", "()"), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8))},
      {"c128_1", NpyFile(Dict("<c16", "(1,)"), std::string(16, '\x3f'))},
      {"pred_4", NpyFile(Dict("|b1", "(4,)"), std::string("\x00\x01\x01\x00", 4))},
      {"u8_empty", NpyFile(Dict("|u1", "(0, 7)"))},
      {"f16_v2", NpyFile(Dict("<f2", "(2,)"), std::string("\x00\x3c\x00\xc0", 4), 2)},
      {"u16_v3", NpyFile(Dict("<u2", "(1,)"), std::string("\xff\xff", 2), 3)},
  };
}

TEST(NpyHostileTest, EveryTruncationOfAValidFileIsRefusedInOneLine) {
  for (const auto& [name, bytes] : ValidFiles()) {
    ASSERT_TRUE(ParseNpy(bytes, name).ok()) << name;
    for (size_t length = 0; length < bytes.size(); ++length) {
      SCOPED_TRACE(name + " cut to " + std::to_string(length) + " bytes");
      StatusOr<Literal> literal = ParseNpy(bytes.substr(0, length), name + ".npy");
      // A zero-size array has no data to cut; everything shorter than its header is refused.
      if (literal.ok()) {
        EXPECT_EQ(literal->element_count(), 0);
        continue;
      }
      ExpectOneCleanLine(literal.status(), name + ".npy");
    }
  }
}

TEST(NpyHostileTest, EveryByteMutationParsesExactlyOrIsRefusedInOneLine) {
  // Bytes that change the meaning of a header: quotes, brackets, digits, signs, separators,
  // and the bytes a terminal or a C string treat specially.
  const char kReplacements[] = {'\0', '\x1b', '\n', '\x7f', '\xff', '\xc3', '(', ')', '[', '{', '}',
                                ',', ':', '\'', '"', '9', '-', ' ', 'L', 'j'};
  for (const auto& [name, bytes] : ValidFiles()) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (char r : kReplacements) {
        if (bytes[i] == r) continue;
        std::string mutated = bytes;
        mutated[i] = r;
        SCOPED_TRACE(name + " byte " + std::to_string(i) + " = " + std::to_string(r & 0xff));
        ExpectLiteralOrCleanError(mutated, name + ".npy");
        if (HasFailure()) return;  // one report, not thousands
      }
    }
  }
}

TEST(NpyHostileTest, HeadersThatLieAboutTheDataAllocateNothing) {
  // Shapes whose arrays would take terabytes or overflow 64 bits, over a few bytes of data: the
  // reader compares the size the header states with the bytes the file holds before allocating.
  const std::string shapes[] = {
      "(1099511627776,)",        "(4611686018427387904,)", "(2147483648, 2147483648)",
      "(4294967296, 4294967296)", "(9223372036854775807,)", "(3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, "
                                                            "3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, "
                                                            "3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3)",
  };
  for (const std::string& shape : shapes) {
    for (const std::string descr : {"<f4", "<c16", "|b1"}) {
      SCOPED_TRACE(descr + " " + shape);
      StatusOr<Literal> literal = ParseNpy(NpyFile(Dict(descr, shape), "12345678"), "lie.npy");
      ASSERT_FALSE(literal.ok());
      ExpectOneCleanLine(literal.status(), "lie.npy");
    }
  }
}

TEST(NpyHostileTest, HeadersBuiltToExhaustTheParserAreBounded) {
  const std::string kilo_digits(100000, '9');
  const std::pair<std::string, std::string> cases[] = {
      {"nested_parens", NpyFile(std::string(200000, '('), "", 2)},
      {"nested_lists", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': " +
                                   std::string(200000, '[') + "}", "", 2)},
      {"nested_dicts", NpyFile(std::string(200000, '{'), "", 2)},
      {"long_integer", NpyFile(Dict("<f4", "(" + kilo_digits + ",)"), "", 2)},
      {"many_dimensions", NpyFile(Dict("<f4", "(" + [] {
                                    std::string dims;
                                    for (int i = 0; i < 100000; ++i) dims += "1, ";
                                    return dims;
                                  }() + ")"), std::string(4, '\0'), 2)},
      {"spaces_16mb", NpyFile(Dict("<f4", "()") + std::string(16 << 20, ' '), std::string(4, '\0'), 3)},
      {"length_4gb", std::string("\x93NUMPY\x03\x00\xff\xff\xff\xff{'descr'", 18)},
  };
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    ExpectLiteralOrCleanError(bytes, name + ".npy");
  }
}

TEST(NpyHostileTest, WhatTheHeaderSaysReachesTheMessageEscaped) {
  // A dtype, a key or a value holding an escape sequence, a newline, a NUL, a C1 control or a
  // cut UTF-8 character: the message shows them escaped, on one line.
  const std::string hostile[] = {"\x1b[2J", "a\nb", std::string("n\0l", 3), "\xc2\x9b" "31m",
                                 "\xe2\x82", "\xff\xfe"};
  for (const std::string& h : hostile) {
    SCOPED_TRACE(EscapeForTerminal(h));
    for (const std::string& dict :
         {Dict(h, "(1,)"), "{'" + h + "': 1}", "{'descr': '<f4', 'fortran_order': " + h + "}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (" + h + ",)}"}) {
      StatusOr<Literal> literal = ParseNpy(NpyFile(dict, std::string(4, '\0')), "esc.npy");
      ASSERT_FALSE(literal.ok());
      ExpectOneCleanLine(literal.status(), "esc.npy");
    }
  }
}

TEST(NpyHostileTest, AOneMegabyteNameInTheHeaderGivesAShortMessage) {
  const std::string huge(1 << 20, 'x');
  for (const std::string& dict : {Dict("<" + huge, "(1,)"), "{'" + huge + "': 1}"}) {
    StatusOr<Literal> literal = ParseNpy(NpyFile(dict, std::string(4, '\0'), 2), "long.npy");
    ASSERT_FALSE(literal.ok());
    ExpectOneCleanLine(literal.status(), "long.npy");
  }
}

// Runs `read` in a child process and returns the message it got, or "blocked" when it did not
// answer within `seconds` (the child is killed). A reader that blocks on a FIFO would otherwise
// hang the test binary.
std::string MessageFromChild(const std::function<std::string()>& read, int seconds = 10) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string message = read();
    ssize_t ignored = ::write(fds[1], message.data(), message.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  pollfd p{fds[0], POLLIN, 0};
  bool done = false;
  while (!done) {
    if (::poll(&p, 1, seconds * 1000) <= 0) {
      ::kill(pid, SIGKILL);
      message = "blocked";
      break;
    }
    char buffer[4096];
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) done = true;
    else message.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "the reader died";
  return message;
}

std::string ReadNpyMessage(const std::string& path) {
  return MessageFromChild([&] {
    StatusOr<Literal> literal = ReadNpy(path);
    return literal.ok() ? std::string("read") : literal.status().message();
  });
}

TEST(NpyHostileTest, SpecialFilesAreRefusedWithoutBlocking) {
  fs::path dir = FreshScratchDir("special");
  const std::string fifo = (dir / "fifo.npy").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(dir / "dir.npy");
  fs::create_symlink("loop2.npy", dir / "loop1.npy");
  fs::create_symlink("loop1.npy", dir / "loop2.npy");
  fs::create_symlink("nowhere.npy", dir / "dangling.npy");
  const std::string paths[] = {fifo,
                               (dir / "dir.npy").string(),
                               (dir / "loop1.npy").string(),
                               (dir / "dangling.npy").string(),
                               (dir / "missing.npy").string(),
                               "/dev/zero",
                               "/dev/null"};
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    std::string message = ReadNpyMessage(path);
    EXPECT_THAT(message, StartsWith(path + ": "));
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

TEST(NpyHostileTest, AFileLargerThanTheInputLimitIsRefusedBeforeItIsRead) {
  // A sparse file: 3 GiB long, no disk used. Reading it whole would take 3 GiB of memory.
  fs::path dir = FreshScratchDir("sparse");
  const std::string path = (dir / "big.npy").string();
  {
    StatusOr<OutputFile> out = OutputFile::Create(path);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_TRUE(out->Write(NpyFile(Dict("<f4", "(805306368,)"))).ok());
    ASSERT_TRUE(out->Commit().ok());
  }
  ASSERT_EQ(::truncate(path.c_str(), int64_t{3} << 30), 0);
  std::string message = ReadNpyMessage(path);
  EXPECT_THAT(message, StartsWith(path + ": "));
  EXPECT_THAT(message, HasSubstr("GiB"));
}

TEST(NpyHostileTest, WritingKeepsLinksDevicesAndDirectoriesAsTheyAre) {
  fs::path dir = FreshScratchDir("write");
  Shape shape(PrimitiveType::F32, {2});
  shape.SetDefaultLayout();
  Literal literal(shape);
  literal.SetFromDouble(0, 1.5);
  literal.SetFromDouble(1, -2);

  // A symlink: its target gets the array, the link stays.
  fs::path target = dir / "target.npy";
  fs::create_symlink("target.npy", dir / "link.npy");
  ASSERT_TRUE(WriteNpy((dir / "link.npy").string(), literal).ok());
  EXPECT_TRUE(fs::is_symlink(dir / "link.npy"));
  StatusOr<Literal> back = ReadNpy(target.string());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == literal);

  // A directory, a path under a regular file, a missing directory: refused, nothing created.
  fs::create_directory(dir / "d.npy");
  {
    StatusOr<OutputFile> f = OutputFile::Create((dir / "file").string());
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write("keep").ok());
    ASSERT_TRUE(f->Commit().ok());
  }
  for (const fs::path& bad : {dir / "d.npy", dir / "file" / "x.npy", dir / "no" / "such" / "x.npy"}) {
    SCOPED_TRACE(bad.string());
    Status status = WriteNpy(bad.string(), literal);
    ASSERT_FALSE(status.ok());
    ExpectOneCleanLine(status, bad.string());
  }
  EXPECT_TRUE(fs::is_directory(dir / "d.npy"));
  EXPECT_FALSE(fs::exists(dir / "no"));

  // /dev/null stays the system's /dev/null; a FIFO nobody reads is refused, not waited on.
  ASSERT_TRUE(WriteNpy("/dev/null", literal).ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const std::string fifo = (dir / "fifo.npy").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string message = MessageFromChild([&] {
    Status s = WriteNpy(fifo, literal);
    return s.ok() ? std::string("written") : s.message();
  });
  EXPECT_THAT(message, StartsWith(fifo + ": "));
  EXPECT_TRUE(fs::is_fifo(fifo));
  // Nothing was left behind: no temporary beside the targets.
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 5);  // target.npy, link.npy, d.npy, file, fifo.npy
}

}  // namespace
}  // namespace xlens
