#include "compiler/support/file_io.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("xlens_file_io_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(FileIoTest, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  std::string dir = TempDir();
  std::string path = dir + "/out.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second, longer").ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "second, longer");
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  std::filesystem::remove_all(dir);
}

TEST(FileIoTest, ErrorsNameThePathAndTheReason) {
  auto read = ReadFile("/nonexistent/dir/file.hlo");
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("/nonexistent/dir/file.hlo: cannot open"));
  Status write = WriteFileAtomic("/nonexistent/dir/out.txt", "x");
  ASSERT_FALSE(write.ok());
  EXPECT_THAT(write.message(), HasSubstr("/nonexistent/dir/out.txt"));
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
