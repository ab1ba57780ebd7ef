#include "compiler/support/file_io.h"
#include "compiler/support/private_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("xlens_file_io_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int CountEntries() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }
  std::string dir_;
};

TEST_F(FileIoTest, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  std::string path = dir_ + "/out.txt";
  ASSERT_TRUE(WriteFile(path, "first").ok());
  ASSERT_TRUE(WriteFile(path, "second, longer").ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "second, longer");
  EXPECT_EQ(CountEntries(), 1) << "a temporary file was left behind";
}

TEST_F(FileIoTest, ErrorsNameThePathAndTheReason) {
  auto read = ReadFile("/nonexistent/dir/file.hlo");
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("/nonexistent/dir/file.hlo: cannot open"));
  Status write = WriteFile("/nonexistent/dir/out.txt", "x");
  ASSERT_FALSE(write.ok());
  EXPECT_THAT(write.message(), HasSubstr("/nonexistent/dir/out.txt"));
  EXPECT_THAT(write.message(), HasSubstr("does not exist"));
}

TEST_F(FileIoTest, ReadingADirectoryIsRefused) {
  auto read = ReadFile(dir_);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("is a directory"));
}

TEST_F(FileIoTest, ReadingAFifoIsRefusedWithoutBlocking) {
  std::string fifo = dir_ + "/manifest.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto read = ReadFile(fifo);  // would block forever on open() without O_NONBLOCK
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("is a FIFO, not a regular file"));
}

TEST_F(FileIoTest, ReadingACharacterDeviceIsRefused) {
  auto read = ReadFile("/dev/zero");  // would grow without end if read to end of file
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("/dev/zero: is a character device"));
}

TEST_F(FileIoTest, FilesOverTheLimitAreRefusedWithTheLimitAndHowToRaiseIt) {
  std::string path = dir_ + "/big.hlo";
  ASSERT_TRUE(WriteFile(path, std::string(5000, 'x')).ok());
  auto read = ReadFile(path, 4096);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("4.9 KiB is more than the 4 KiB limit"));
  EXPECT_THAT(read.status().message(), HasSubstr("--max-input-size"));
  EXPECT_TRUE(ReadFile(path, 5000).ok());

  SetMaxInputBytes(1024);
  EXPECT_FALSE(ReadFile(path).ok());
  SetMaxInputBytes(kDefaultMaxInputBytes);
  EXPECT_TRUE(ReadFile(path).ok());
}

TEST_F(FileIoTest, ASymlinkLoopIsOneMessage) {
  std::string a = dir_ + "/a", b = dir_ + "/b";
  ASSERT_EQ(::symlink(b.c_str(), a.c_str()), 0);
  ASSERT_EQ(::symlink(a.c_str(), b.c_str()), 0);
  auto read = ReadFile(a);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("symbolic links"));
  Status write = WriteFile(a, "x");
  ASSERT_FALSE(write.ok());
  EXPECT_THAT(write.message(), HasSubstr("symbolic links"));
  EXPECT_EQ(GetPathKind(a), PathKind::kSymlinkLoop);
}

TEST_F(FileIoTest, AVeryLongPathIsShortenedInTheMessage) {
  std::string path = dir_ + "/" + std::string(5000, 'p');
  auto read = ReadFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("file name too long"));
  EXPECT_LT(read.status().message().size(), 400u);
}

TEST_F(FileIoTest, WritingToACharacterDeviceWritesThroughAndKeepsTheDevice) {
  // A private /dev/null: the bug turned the system's into a regular file.
  std::string null = dir_ + "/null";
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot create a character device here (needs root): " << std::strerror(errno);
  }
  ASSERT_TRUE(WriteFile(null, "into the void").ok());
  struct stat st;
  ASSERT_EQ(::stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced";
  EXPECT_EQ(CountEntries(), 1) << "a temporary was left beside the device";
}

TEST_F(FileIoTest, WritingToAFifoWithAReaderWritesThrough) {
  std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    int fd = ::open(fifo.c_str(), O_RDONLY);
    char buffer[64];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) received.append(buffer, n);
    ::close(fd);
  });
  // The writer refuses a FIFO nobody reads; retry until the reader has opened its end.
  Status status;
  for (int i = 0; i < 500; ++i) {
    status = WriteFile(fifo, "through the pipe");
    if (status.ok()) break;
    ::usleep(2000);
  }
  reader.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(received, "through the pipe");
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(FileIoTest, WritingToAFifoNobodyReadsIsRefusedNotWaitedOn) {
  std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Status status = WriteFile(fifo, "x");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("FIFO that nobody is reading"));
}

TEST_F(FileIoTest, WritingThroughASymlinkReplacesTheTargetAndKeepsTheLink) {
  std::string target = dir_ + "/real.txt", link = dir_ + "/link.txt";
  ASSERT_TRUE(WriteFile(target, "old").ok());
  ASSERT_EQ(::symlink("real.txt", link.c_str()), 0);  // relative, as users make them
  ASSERT_TRUE(WriteFile(link, "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(*ReadFile(target), "new");
  EXPECT_EQ(CountEntries(), 2);
}

TEST_F(FileIoTest, ADanglingSymlinkCreatesItsTarget) {
  std::string link = dir_ + "/link.txt";
  ASSERT_EQ(::symlink("created.txt", link.c_str()), 0);
  ASSERT_TRUE(WriteFile(link, "made").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(*ReadFile(dir_ + "/created.txt"), "made");
}

TEST_F(FileIoTest, NoFollowReadsRefuseASymlinkAtTheName) {
  const std::string target = dir_ + "/target";
  ASSERT_TRUE(WriteFile(target, "inside").ok());
  const std::string link = dir_ + "/entry";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  auto refused = InputFile::OpenNoFollow(link);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(link + ": is a symbolic link"));
  EXPECT_TRUE(InputFile::Open(link).ok()) << "Open still follows links";
  auto regular = InputFile::OpenNoFollow(target);
  ASSERT_TRUE(regular.ok());
  EXPECT_EQ(regular->size(), 6);
}

TEST_F(FileIoTest, NoFollowWholeReadsRefuseALinkAndKeepTheLimit) {
  const std::string target = dir_ + "/target";
  ASSERT_TRUE(WriteFile(target, "inside").ok());
  const std::string link = dir_ + "/entry";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  auto refused = ReadFileNoFollow(link);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(link + ": is a symbolic link"));
  auto whole = ReadFileNoFollow(target);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(*whole, "inside");
  auto over = ReadFileNoFollow(target, 5);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr(target));
}

// A cache directory others can write to is said once in the process, whichever cache asks
// (compiled code, kernel choices), and again only once forgotten.
TEST_F(FileIoTest, AnUnusableCacheDirectoryIsSaidOnce) {
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0775), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  std::string first, second, again;
  EXPECT_FALSE(UsableCacheDirectory(shared, /*create=*/false, &first));
  EXPECT_FALSE(UsableCacheDirectory(shared, /*create=*/true, &second));
  EXPECT_THAT(first, HasSubstr("persistent cache directory " + shared));
  EXPECT_THAT(first, HasSubstr("group"));
  EXPECT_THAT(first, HasSubstr("compiling without the cache (and timing kernel choices in every process)"));
  EXPECT_EQ(second, "");
  ForgetReportedCacheDirectories();
  EXPECT_FALSE(UsableCacheDirectory(shared, /*create=*/false, &again));
  EXPECT_EQ(again, first);
  // A private one is usable once made; a missing one is not, unless made.
  std::string none;
  const std::string own = dir_ + "/own";
  EXPECT_FALSE(UsableCacheDirectory(own, /*create=*/false, &none));
  EXPECT_TRUE(UsableCacheDirectory(own, /*create=*/true, &none));
  EXPECT_TRUE(UsableCacheDirectory(own, /*create=*/false, &none));
  EXPECT_EQ(none, "");
}

TEST_F(FileIoTest, NoFollowWritesReplaceAPlantedLinkAndNeverWriteThroughIt) {
  const std::string outside = dir_ + "/outside";
  std::filesystem::create_directories(outside);
  const std::string victim = outside + "/victim";
  ASSERT_TRUE(WriteFile(victim, "precious").ok());
  const std::string dangling_target = outside + "/created";
  const std::string cache = dir_ + "/cache";
  std::filesystem::create_directories(cache);
  const std::string to_victim = cache + "/a";
  const std::string dangling = cache + "/b";
  ASSERT_EQ(::symlink(victim.c_str(), to_victim.c_str()), 0);
  ASSERT_EQ(::symlink(dangling_target.c_str(), dangling.c_str()), 0);
  for (const std::string& path : {to_victim, dangling}) {
    auto out = OutputFile::CreateNoFollow(path);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_TRUE(out->Write("entry").ok());
    ASSERT_TRUE(out->Commit().ok());
    struct stat st;
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << path << " is still a link";
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(*ReadFile(path), "entry");
  }
  EXPECT_EQ(*ReadFile(victim), "precious");
  EXPECT_FALSE(std::filesystem::exists(dangling_target));
  int in_cache = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(cache)) ++in_cache;
  EXPECT_EQ(in_cache, 2) << "a temporary was left behind";
}

TEST_F(FileIoTest, NoFollowWritesDoNotReplaceADirectory) {
  const std::string path = dir_ + "/d";
  std::filesystem::create_directories(path + "/inner");
  auto out = OutputFile::CreateNoFollow(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_TRUE(out->Write("x").ok());
  EXPECT_FALSE(out->Commit().ok());
  EXPECT_TRUE(std::filesystem::is_directory(path + "/inner"));
  EXPECT_EQ(CountEntries(), 1) << "a temporary was left behind";
}

TEST_F(FileIoTest, WritingOverADirectoryIsRefused) {
  std::filesystem::create_directories(dir_ + "/out");
  Status status = WriteFile(dir_ + "/out", "x");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("is a directory"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/out"));
}

TEST_F(FileIoTest, ReplacingAFileKeepsItsPermissions) {
  std::string path = dir_ + "/script.sh";
  ASSERT_TRUE(WriteFile(path, "old").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0750), 0);
  ASSERT_TRUE(WriteFile(path, "new").ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(FileIoTest, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
  std::string path = dir_ + "/result.npy";
  ASSERT_TRUE(WriteFile(path, "complete").ok());
  {
    auto out = OutputFile::Create(path);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(out->Write("half").ok());
    EXPECT_EQ(CountEntries(), 2);  // the temporary is beside the target while writing
  }
  EXPECT_EQ(*ReadFile(path), "complete");
  EXPECT_EQ(CountEntries(), 1);
}

TEST_F(FileIoTest, StaleTemporariesOfDeadWritersAreRemovedLiveOnesKept) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer runs
  std::string stale = fmt::format("{}/m.txt.xlens-tmp.{}.0", dir_, child);
  std::string live = fmt::format("{}/m.txt.xlens-tmp.{}.3", dir_, ::getpid());
  std::string other = dir_ + "/m.txt.xlens-tmp.notapid";
  for (const std::string& p : {stale, live, other}) ASSERT_TRUE(WriteFile(p, "").ok());
  EXPECT_TRUE(IsTemporaryName("m.txt.xlens-tmp.12.0"));
  EXPECT_FALSE(IsTemporaryName("m.txt.xlens-tmp.notapid"));
  EXPECT_EQ(RemoveStaleTemporaries(dir_), 1);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(other));
}

TEST_F(FileIoTest, StreamingReadsReturnTheWholeFileInPieces) {
  std::string path = dir_ + "/trace.json";
  std::string contents(100000, 'a');
  contents[99999] = 'z';
  ASSERT_TRUE(WriteFile(path, contents).ok());
  auto in = InputFile::Open(path);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->size(), 100000);
  std::string got;
  char buffer[4096];
  for (;;) {
    auto n = in->Read(buffer, sizeof buffer);
    ASSERT_TRUE(n.ok());
    if (*n == 0) break;
    got.append(buffer, *n);
  }
  EXPECT_EQ(got, contents);
}

TEST_F(FileIoTest, CreateDirectoriesSaysWhatIsInTheWay) {
  ASSERT_TRUE(CreateDirectories(dir_ + "/a/b/c").ok());
  ASSERT_TRUE(CreateDirectories(dir_ + "/a/b/c").ok());
  ASSERT_TRUE(WriteFile(dir_ + "/file", "x").ok());
  Status status = CreateDirectories(dir_ + "/file");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("is a file, expected a directory"));
  status = CreateDirectories(dir_ + "/file/sub");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), Not(HasSubstr("filesystem error")));
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0644), 0);
  status = CreateDirectories(dir_ + "/fifo");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("fifo: is a FIFO, expected a directory"));
}

TEST(ByteSizeTest, ParsesUnitsAndRefusesNonsense) {
  EXPECT_EQ(*ParseByteSize("1000"), 1000);
  EXPECT_EQ(*ParseByteSize("64K"), 64 << 10);
  EXPECT_EQ(*ParseByteSize("512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2G"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("3gb"), int64_t{3} << 30);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("-1").ok());
  EXPECT_FALSE(ParseByteSize("12Q").ok());
  EXPECT_FALSE(ParseByteSize("99999999999999999999").ok());
  EXPECT_FALSE(ParseByteSize("99999999T").ok());
  EXPECT_EQ(FormatBytes(100), "100 bytes");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{2} << 30), "2 GiB");
}

TEST(StatusTest, StatusOrCarriesValueOrError) {
  StatusOr<int> good = 3;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  StatusOr<int> bad = Error("no");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "no");
  EXPECT_EQ(bad.status().WithContext("while x").message(), "while x: no");
}

}  // namespace
}  // namespace xlens
