#include "compiler/graph/table_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "graph/table_test_util.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::BuildTable;

std::vector<std::pair<std::string, std::string>> ManyEntries(int n) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < n; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "layer/%04d/kernel", i);
    entries.push_back({key, std::string(static_cast<size_t>(i % 7), static_cast<char>('a' + i % 26))});
  }
  return entries;
}

TEST(Crc32cTest, KnownValuesAndMask) {
  // The check value of CRC-32C and LevelDB's test vectors.
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  // Extending in pieces is the same as at once.
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), Crc32c("123456789"));
  EXPECT_NE(MaskCrc32c(0x12345678u), 0x12345678u);
  EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(0x12345678u)), 0x12345678u);
}

TEST(TableReaderTest, ReadsEveryEntryAcrossBlocksInOrder) {
  const auto entries = ManyEntries(100);
  auto table = ReadTable(BuildTable(entries, /*per_block=*/9), "t.index");
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_EQ(table->size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ((*table)[i].key, entries[i].first);
    EXPECT_EQ((*table)[i].value, entries[i].second);
  }
}

TEST(TableReaderTest, ReadsTensorFlowsIndex) {
  auto bytes = ReadFile(std::string(XLENS_TESTDATA_DIR) + "/saved_model/small/variables/variables.index");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto table = ReadTable(*bytes, "variables.index");
  ASSERT_TRUE(table.ok()) << table.status().message();
  std::vector<std::string> keys;
  for (const auto& e : *table) keys.push_back(e.key);
  EXPECT_THAT(keys, ::testing::ElementsAre("", "_CHECKPOINTABLE_OBJECT_GRAPH",
                                           "b/.ATTRIBUTES/VARIABLE_VALUE",
                                           "d/.ATTRIBUTES/VARIABLE_VALUE",
                                           "i/.ATTRIBUTES/VARIABLE_VALUE",
                                           "w/.ATTRIBUTES/VARIABLE_VALUE"));
}

TEST(TableReaderTest, RefusesBrokenTablesWithTheirPlace) {
  const std::string good = BuildTable(ManyEntries(40), 16);
  auto refuse = [](const std::string& bytes) {
    auto t = ReadTable(bytes, "t.index");
    EXPECT_FALSE(t.ok());
    return t.ok() ? std::string() : t.status().message();
  };
  EXPECT_THAT(refuse(""), AllOf(StartsWith("t.index: byte 0:"), HasSubstr("footer")));
  EXPECT_THAT(refuse(good.substr(0, good.size() - 1)), HasSubstr("magic number"));
  EXPECT_THAT(refuse(good.substr(10)), HasSubstr("t.index"));
  // A flipped byte in the first data block: its checksum.
  std::string flipped = good;
  flipped[3] ^= 0x20;
  EXPECT_THAT(refuse(flipped), AllOf(HasSubstr("checksum"), HasSubstr("CRC-32C")));
  // Every single-byte truncation and corruption is refused or read, never a crash.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string b = good;
    b[i] = static_cast<char>(b[i] ^ 0xff);
    auto t = ReadTable(b, "t.index");
    if (!t.ok()) {
      EXPECT_THAT(t.status().message(), StartsWith("t.index: "));
    }
  }
}

TEST(TableReaderTest, RefusesSnappyOutOfOrderAndSharedPastTheKey) {
  using testing::AppendBlock;
  using testing::BlockOf;
  auto table_of = [](const std::string& data_block, char type) {
    std::string file;
    std::string handle = AppendBlock(&file, data_block, type);
    std::string meta = AppendBlock(&file, BlockOf({}));
    std::string index = AppendBlock(&file, BlockOf({{"zzz", handle}}));
    std::string footer = meta + index;
    footer.resize(40, '\0');
    testing::PutFixed32(&footer, 0x8b80fb57u);
    testing::PutFixed32(&footer, 0xdb477524u);
    return file + footer;
  };
  auto snappy = ReadTable(table_of(BlockOf({{"a", "1"}}), 1), "t.index");
  ASSERT_FALSE(snappy.ok());
  EXPECT_THAT(snappy.status().message(), HasSubstr("Snappy"));
  auto order = ReadTable(table_of(BlockOf({{"b", "1"}, {"a", "2"}}), 0), "t.index");
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("out of order"));
  // An entry sharing 5 bytes with an empty previous key.
  std::string block;
  testing::PutVarint(&block, 5);
  testing::PutVarint(&block, 1);
  testing::PutVarint(&block, 0);
  block += "k";
  testing::PutFixed32(&block, 0);
  testing::PutFixed32(&block, 1);
  auto shared = ReadTable(table_of(block, 0), "t.index");
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.status().message(), HasSubstr("shares 5 bytes"));
}

TEST(TableReaderTest, BoundsWhatKeysCanExpandTo) {
  // Keys that share a long prefix: small on disk, large rebuilt.
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 15; ++i) entries.push_back({std::string(4096, 'k') + static_cast<char>('a' + i), ""});
  TableLimits limits;
  limits.max_decoded_bytes = 20000;
  auto t = ReadTable(BuildTable(entries), "t.index", limits);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("add up to more than"));
  EXPECT_TRUE(ReadTable(BuildTable(entries), "t.index").ok());
}

}  // namespace
}  // namespace xlens::graph
