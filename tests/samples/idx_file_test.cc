// The IDX reader on hostile input: every broken file of testdata/idx_broken gets one message that
// names the file and what was expected, never a crash; good files, plain or gzipped, read back.
#include "samples/data/idx_file.h"

#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"

namespace xlens::samples {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kBroken = std::string(XLENS_TESTDATA_DIR) + "/idx_broken";

TEST(IdxFileTest, ReadsAPlainAndAGzippedFileAlike) {
  for (const char* name : {"good.idx", "good.idx.gz"}) {
    auto array = ReadIdxFile(kBroken + "/" + name);
    ASSERT_TRUE(array.ok()) << array.status().message();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 2, 2})) << name;
    EXPECT_EQ(array->data, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7})) << name;
  }
}

TEST(IdxFileTest, EveryBrokenFileGetsOneMessageNamingItAndWhatWasExpected) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.idx", "too short for an IDX file (expected a 4-byte magic number)"},
      {"short_magic.idx", "too short for an IDX file"},
      {"bad_magic.idx", "at byte 0: magic 0x504b0304 is not an IDX file's"},
      {"float_type.idx", "at byte 2: element type 0x0d (float) is not supported (expected 0x08"},
      {"rank_zero.idx", "at byte 3: rank 0 (expected 1 to 4)"},
      {"rank_five.idx", "at byte 3: rank 5 (expected 1 to 4)"},
      {"short_header.idx", "the header of a rank-3 IDX file needs 16 bytes"},
      {"huge_dims.idx", "at byte 4: dimension 0 is 4294967295, which needs more data than the 24-byte file holds"},
      {"truncated_data.idx", "at byte 16: the header promises 8 bytes of data, the file has 5 (truncated)"},
      {"trailing_bytes.idx", "the header promises 8 bytes of data, the file has 11 (trailing bytes)"},
      {"truncated.idx.gz", "the gzip stream ends early (truncated file)"},
      {"corrupt.idx.gz", "corrupt gzip stream"},
      {"gzip_of_garbage.idx.gz", "(inflated): at byte 0: magic 0x68656c6c is not an IDX file's"},
  };
  int seen = 0;
  for (const auto& [name, expected] : cases) {
    const std::string path = kBroken + "/" + name;
    ASSERT_TRUE(fs::exists(path)) << path;
    auto array = ReadIdxFile(path);
    ASSERT_FALSE(array.ok()) << name << " was read";
    EXPECT_THAT(array.status().message(), HasSubstr(path)) << name;
    EXPECT_THAT(array.status().message(), HasSubstr(expected)) << name;
    EXPECT_EQ(array.status().message().find('\n'), std::string::npos) << name;
    ++seen;
  }
  // Every file of the corpus is covered (the good ones by the test above).
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kBroken)) files += entry.is_regular_file();
  EXPECT_EQ(files, seen + 2);
}

TEST(IdxFileTest, ADirectoryOrAMissingFileIsRefusedByName) {
  auto dir = ReadIdxFile(kBroken);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr(kBroken));
  auto missing = ReadIdxFile(kBroken + "/no_such.idx");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no_such.idx"));
}

TEST(IdxFileTest, AGzipBombStopsAtTheLimit) {
  // 16 MiB of zeros in 16 KiB: with a 1 MiB limit inflation stops as soon as it passes it.
  auto bytes = ReadFile(std::string(XLENS_TESTDATA_DIR) + "/zeros_16MiB.gz");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  ASSERT_LT(bytes->size(), 100000u);
  auto inflated = Gunzip(*bytes, "zeros.gz", 1 << 20);
  ASSERT_FALSE(inflated.ok());
  EXPECT_THAT(inflated.status().message(), HasSubstr("zeros.gz: inflates to more than 1 MiB (the input size limit"));
  auto whole = Gunzip(*bytes, "zeros.gz", 32 << 20);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->size(), size_t{16} << 20);
}

TEST(IdxFileTest, WrittenFilesReadBack) {
  const std::string path = (fs::temp_directory_path() / ("xlens_idx_rt_" + std::to_string(::getpid()))).string();
  IdxArray a{{3, 2}, {9, 8, 7, 6, 5, 4}};
  ASSERT_TRUE(WriteIdxFile(path, a).ok());
  auto b = ReadIdxFile(path);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->dims, a.dims);
  EXPECT_EQ(b->data, a.data);
  fs::remove(path);
}

}  // namespace
}  // namespace xlens::samples
