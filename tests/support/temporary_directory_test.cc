#include "compiler/support/temporary_directory.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sets TMPDIR for one test and puts the old value back.
class TmpdirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("TMPDIR")) saved_ = old;
    had_ = std::getenv("TMPDIR") != nullptr;
    char pattern[] = "/tmp/xlens-tmpdir-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    fresh_ = pattern;
  }
  void TearDown() override {
    if (had_) {
      ::setenv("TMPDIR", saved_.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    std::filesystem::remove_all(fresh_);
  }
  std::string fresh_, saved_;
  bool had_ = false;
};

TEST_F(TmpdirTest, MadeUnderTmpdirPrivateAndRemovedWithItsContents) {
  ::setenv("TMPDIR", fresh_.c_str(), 1);
  EXPECT_EQ(TemporaryDirectoryBase(), fresh_);
  std::string path;
  {
    auto dir = TemporaryDirectory::Create("unit");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    path = dir->path();
    EXPECT_THAT(path, StartsWith(fresh_ + "/xlens-unit-"));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::filesystem::create_directories(path + "/a/b");
    std::ofstream(path + "/a/b/file") << "x";
    // A link planted inside is removed, not followed.
    std::ofstream(fresh_ + "/outside") << "keep";
    std::filesystem::create_symlink(fresh_ + "/outside", path + "/link");
    // A moved-from directory removes nothing; the new owner does.
    TemporaryDirectory moved = std::move(*dir);
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(fresh_ + "/outside"));
}

TEST_F(TmpdirTest, TwoAreDistinct) {
  ::setenv("TMPDIR", fresh_.c_str(), 1);
  auto a = TemporaryDirectory::Create("unit");
  auto b = TemporaryDirectory::Create("unit");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
}

TEST_F(TmpdirTest, EmptyOrUnsetTmpdirMeansTmp) {
  ::setenv("TMPDIR", "", 1);
  EXPECT_EQ(TemporaryDirectoryBase(), "/tmp");
  ::unsetenv("TMPDIR");
  EXPECT_EQ(TemporaryDirectoryBase(), "/tmp");
}

// A TMPDIR that does not exist is an error naming it, not a silent fall back to /tmp.
TEST_F(TmpdirTest, MissingTmpdirIsOneMessage) {
  ::setenv("TMPDIR", (fresh_ + "/no-such-dir").c_str(), 1);
  auto dir = TemporaryDirectory::Create("unit");
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("no-such-dir"));
  EXPECT_THAT(dir.status().message(), HasSubstr("No such file or directory"));
}

// An explicit parent wins over TMPDIR.
TEST_F(TmpdirTest, ParentOverridesTmpdir) {
  ::setenv("TMPDIR", "/nonexistent", 1);
  auto dir = TemporaryDirectory::Create("unit", fresh_);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_THAT(dir->path(), StartsWith(fresh_ + "/xlens-unit-"));
}

}  // namespace
}  // namespace xlens
