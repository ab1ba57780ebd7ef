#include "compiler/hlo/tile_assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TileAssignment MustParse(std::string_view text) {
  auto parsed = TileAssignment::Parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *parsed : TileAssignment();
}

TEST(TileAssignmentTest, ExplicitFormKeepsTheDevicesInRowMajorOrder) {
  TileAssignment t = MustParse("[2,2]0,2,1,3");
  EXPECT_FALSE(t.is_iota());
  EXPECT_THAT(t.dims(), ElementsAre(2, 2));
  EXPECT_EQ(t.num_elements(), 4);
  std::vector<int64_t> index = {0, 1};
  EXPECT_EQ(t.DeviceAt(index), 2);
  EXPECT_THAT(*t.IndexOf(1), ElementsAre(1, 0));
  EXPECT_FALSE(t.IndexOf(7).has_value());
  EXPECT_EQ(t.ToString(), "[2,2]0,2,1,3");
}

TEST(TileAssignmentTest, IotaFormIsIotaReshapedToTheDims) {
  TileAssignment t = MustParse("[4,2]<=[8]");
  EXPECT_TRUE(t.is_iota());
  EXPECT_THAT(t.devices(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  std::vector<int64_t> index = {3, 0};
  EXPECT_EQ(t.DeviceAt(index), 6);
  EXPECT_EQ(t.ToString(), "[4,2]<=[8]");
}

TEST(TileAssignmentTest, TransposedIotaTransposesTheReshapedIota) {
  // iota(4) as [[0,1],[2,3]], transposed: [[0,2],[1,3]].
  TileAssignment t = MustParse("[2,2]<=[2,2]T(1,0)");
  EXPECT_THAT(t.devices(), ElementsAre(0, 2, 1, 3));
  EXPECT_EQ(t.ToString(), "[2,2]<=[2,2]T(1,0)");
  // The same devices written out explicitly compare equal, and keep their form in print.
  EXPECT_EQ(t, MustParse("[2,2]0,2,1,3"));
  // [2,4] over iota(8) reshaped [2,2,2] with T(2,1,0): device = 4*k0 + 2*k1 + k2 where the result
  // index (i, j) with j split as (j1, j2) maps to k2=i, k1=j1, k0=j2.
  TileAssignment u = MustParse("[2,4]<=[2,2,2]T(2,1,0)");
  EXPECT_THAT(u.devices(), ElementsAre(0, 4, 2, 6, 1, 5, 3, 7));
  EXPECT_EQ(u.ToString(), "[2,4]<=[2,2,2]T(2,1,0)");
}

TEST(TileAssignmentTest, IotaFormIsCanonicalizedAsXlaDoes) {
  // An identity transpose merges to one reshape dim; size-1 dims go.
  EXPECT_EQ(MustParse("[2,2]<=[2,2]").ToString(), "[2,2]<=[4]");
  EXPECT_EQ(MustParse("[2,2]<=[2,2]T(0,1)").ToString(), "[2,2]<=[4]");
  EXPECT_EQ(MustParse("[4,1]<=[1,4]T(1,0)").ToString(), "[4,1]<=[4]");
  // [3,4,5]T(1,2,0) keeps 1 and 2 together in order: [3,20]T(1,0).
  TileAssignment t = MustParse("[20,3]<=[3,4,5]T(1,2,0)");
  EXPECT_EQ(t.ToString(), "[20,3]<=[3,20]T(1,0)");
  EXPECT_THAT(t.iota_reshape_dims(), ElementsAre(3, 20));
  EXPECT_EQ(t.devices()[1], 20);
  EXPECT_EQ(MustParse("[1]<=[1]").ToString(), "[1]<=[1]");
}

TEST(TileAssignmentTest, RowsAreReplicaGroups) {
  TileAssignment t = MustParse("[2,2]<=[4]");
  EXPECT_THAT(t.Rows(), ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3)));
  TileAssignment u = MustParse("[2,2]<=[2,2]T(1,0)");
  EXPECT_THAT(u.Rows(), ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
  EXPECT_EQ(u.MaxDevicePlusOne(), 4);
}

TEST(TileAssignmentTest, ReadStopsBeforeTheNextAttribute) {
  TextCursor cursor("[2,2]<=[4], channel_id=1", "test");
  auto t = TileAssignment::Read(cursor);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(cursor.Peek(), ',');
  TextCursor explicit_cursor("[2]0,1, to_apply=%add", "test");
  ASSERT_TRUE(TileAssignment::Read(explicit_cursor).ok());
  EXPECT_EQ(explicit_cursor.Peek(), ',');
}

TEST(TileAssignmentTest, BuildersAgreeWithTheText) {
  auto iota = TileAssignment::Iota({2, 2}, {2, 2}, {1, 0});
  ASSERT_TRUE(iota.ok());
  EXPECT_EQ(iota->ToString(), "[2,2]<=[2,2]T(1,0)");
  auto plain = TileAssignment::Iota({4});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ToString(), "[4]<=[4]");
  auto listed = TileAssignment::FromDevices({2}, {1, 0});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->ToString(), "[2]1,0");
}

void ExpectError(std::string_view text, std::string_view expected) {
  auto parsed = TileAssignment::Parse(text, "t");
  ASSERT_FALSE(parsed.ok()) << text;
  EXPECT_THAT(parsed.status().message(), HasSubstr(std::string(expected))) << text;
  EXPECT_THAT(parsed.status().message(), HasSubstr("t:1:")) << text;
}

TEST(TileAssignmentTest, MalformedTextIsAnErrorAtItsPosition) {
  ExpectError("[2,2]0,1,2", "need 4 device ids");
  ExpectError("[2]0,1,2", "more device ids are listed");
  ExpectError("[2,2]0,1,1,3", "device 1 appears twice");
  ExpectError("[2]0,-1", "negative");
  ExpectError("[0,2]", "at least 1");
  ExpectError("[]", "empty");
  ExpectError("[100000,100000]<=[10000000000]", "more than");
  ExpectError("[4,2]<=[4]", "hold 4 devices but tile dims [4,2] hold 8");
  ExpectError("[2,2]<=[2,2]T(0,0)", "not a permutation");
  ExpectError("[2,2]<=[2,2]T(1)", "has 1 entries for 2 reshape dims");
  ExpectError("[2,2]<=[4", "to close the iota reshape dims");
  ExpectError("[2,2]<=", "to open the iota reshape dims");
  ExpectError("[2", "to close the tile dims");
  ExpectError("[2]0,1 x", "expected the end");
  ExpectError("[99999999999999999999]", "out of range");
  std::string ones = "[1";
  for (int i = 0; i < 100; ++i) ones += ",1";
  ExpectError(ones + "]<=[1]", "at most 64");
  ExpectError("[1]<=" + ones + "]", "at most 64");
}

}  // namespace
}  // namespace xlens
