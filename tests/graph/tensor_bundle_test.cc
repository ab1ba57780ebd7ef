#include "compiler/graph/tensor_bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/proto/tensor_bundle.pb.h"
#include "compiler/graph/table_reader.h"
#include "graph/table_test_util.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kSmall = std::string(XLENS_TESTDATA_DIR) + "/saved_model/small/variables/variables";
const std::string kSliced = std::string(XLENS_TESTDATA_DIR) + "/saved_model/sliced/variables/variables";

// Shards held in memory.
class MemoryShards : public BundleShards {
 public:
  explicit MemoryShards(std::vector<std::string> shards) : shards_(std::move(shards)) {}
  StatusOr<int64_t> Size(int shard) override { return static_cast<int64_t>(shards_[shard].size()); }
  Status Read(int shard, int64_t offset, char* data, size_t size) override {
    std::memcpy(data, shards_[shard].data() + offset, size);
    return OkStatus();
  }
  std::string Name(int shard) const override { return "shard" + std::to_string(shard); }

 private:
  std::vector<std::string> shards_;
};

// An index of `entries` (key -> BundleEntryProto) with a header of `num_shards`.
std::string IndexOf(int num_shards, std::vector<std::pair<std::string, tfproto::BundleEntryProto>> entries) {
  tfproto::BundleHeaderProto header;
  header.set_num_shards(num_shards);
  header.mutable_version()->set_producer(1);
  std::vector<std::pair<std::string, std::string>> table = {{"", header.SerializeAsString()}};
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [key, e] : entries) table.push_back({key, e.SerializeAsString()});
  return testing::BuildTable(table);
}

tfproto::BundleEntryProto FloatEntry(std::vector<int64_t> dims, int64_t offset, const std::string& bytes) {
  tfproto::BundleEntryProto e;
  e.set_dtype(tfproto::DT_FLOAT);
  for (int64_t d : dims) e.mutable_shape()->add_dim()->set_size(d);
  e.set_offset(offset);
  e.set_size(static_cast<int64_t>(bytes.size()));
  e.set_crc32c(MaskCrc32c(Crc32c(bytes)));
  return e;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

TEST(TensorBundleTest, ReadsTensorFlowsCheckpoint) {
  auto bundle = TensorBundle::Open(kSmall);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->num_shards(), 1);
  EXPECT_THAT(bundle->keys(), ::testing::Contains("w/.ATTRIBUTES/VARIABLE_VALUE"));
  auto w = bundle->Read("w/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->dtype(), DT_FLOAT);
  ASSERT_EQ(w->dims(), (std::vector<int64_t>{2, 3}));
  for (int k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(w->flat<float>()[k], static_cast<float>(k) / 7);
  auto i = bundle->Read("i/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_EQ(i->dtype(), DT_INT32);
  EXPECT_EQ(i->flat<int32_t>()[3], 4);
  auto d = bundle->Read("d/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->flat<double>()[0], 2.25);
  // The object graph is a string tensor: lengths, their checksum, the bytes.
  auto graph = bundle->Read("_CHECKPOINTABLE_OBJECT_GRAPH");
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  EXPECT_EQ(graph->dtype(), DT_STRING);
  EXPECT_THAT(graph->strings()[0], HasSubstr("w/.ATTRIBUTES/VARIABLE_VALUE"));
  auto missing = bundle->Read("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no key 'nope'"));
}

TEST(TensorBundleTest, AssemblesATensorSavedInSlicesAcrossShards) {
  auto bundle = TensorBundle::Open(kSliced);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->num_shards(), 2);
  const BundleEntry* entry = bundle->Find("v/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(entry->slices.size(), 2u);
  // TensorFlow's key for the first slice, as its index holds it.
  EXPECT_EQ(EncodeTensorNameSlice("v/.ATTRIBUTES/VARIABLE_VALUE", entry->slices[0]),
            std::string("\x00v/.ATTRIBUTES/VARIABLE_VALUE\x00\x01\x01\x02\x80\x83\x80\x85", 37));
  auto v = bundle->Read("v/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->dims(), (std::vector<int64_t>{6, 5}));
  for (int k = 0; k < 30; ++k) EXPECT_EQ(v->flat<float>()[k], static_cast<float>(k)) << k;
}

TEST(TensorBundleTest, EncodesSliceKeysAsOrderedCode) {
  BundleSlice s{{0, 150, 3}, {-1, 1000000, 64}};
  // 0, the escaped name, the rank, then signed start/length pairs (-1: the whole dimension).
  EXPECT_EQ(EncodeTensorNameSlice(std::string("a\0b", 3), s),
            std::string("\x00" "a\x00\xff" "b\x00\x01" "\x01\x03" "\x80\x7f" "\xc0\x96\xef\x42\x40"
                        "\x83\xc0\x40", 19));
}

TEST(TensorBundleTest, ChecksumAndPlaceOfEveryRead) {
  const std::string data = FloatBytes({1, 2, 3, 4});
  auto open = [&](tfproto::BundleEntryProto e, std::string shard) {
    return TensorBundle::FromIndex(IndexOf(1, {{"k", e}}), "v.index",
                                   std::make_unique<MemoryShards>(std::vector<std::string>{shard}));
  };
  auto good = open(FloatEntry({2, 2}, 0, data), data);
  ASSERT_TRUE(good.ok()) << good.status().message();
  auto t = good->Read("k");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->flat<float>()[3], 4.0f);

  std::string flipped = data;
  flipped[5] ^= 1;
  auto bad_crc = open(FloatEntry({2, 2}, 0, data), flipped);
  ASSERT_TRUE(bad_crc.ok());
  auto r = bad_crc->Read("k");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(StartsWith("shard0: byte 0:"), HasSubstr("CRC-32C")));

  auto past = open(FloatEntry({2, 2}, 8, data), data);
  ASSERT_TRUE(past.ok());
  r = past->Read("k");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("expected within its 16 bytes"));

  // The index itself refuses a size that disagrees with the dtype and shape, a shard past the
  // header's count, a negative dimension, and a huge shape.
  auto refuse_index = [&](tfproto::BundleEntryProto e) {
    auto b = open(e, data);
    EXPECT_FALSE(b.ok());
    return b.ok() ? std::string() : b.status().message();
  };
  EXPECT_THAT(refuse_index(FloatEntry({3, 2}, 0, data)), HasSubstr("16 bytes for a float[3,2] tensor, expected 24"));
  auto e = FloatEntry({2, 2}, 0, data);
  e.set_shard_id(3);
  EXPECT_THAT(refuse_index(e), HasSubstr("shard 3, expected 0 to 0"));
  e = FloatEntry({-2, 2}, 0, data);
  EXPECT_THAT(refuse_index(e), HasSubstr("expected a size of 0 or more"));
  e = FloatEntry({int64_t{1} << 40, int64_t{1} << 40}, 0, data);
  EXPECT_THAT(refuse_index(e), HasSubstr("more elements than fit in 64 bits"));
  e = FloatEntry({2, 2}, 0, data);
  e.set_dtype(tfproto::DT_VARIANT);
  EXPECT_THAT(refuse_index(e), HasSubstr("a variant tensor"));
}

TEST(TensorBundleTest, SlicesMustCoverTheTensorOnce) {
  const std::string a = FloatBytes({1, 2, 3}), b = FloatBytes({4, 5, 6});
  auto sliced = [](std::vector<std::pair<int64_t, int64_t>> extents) {
    tfproto::BundleEntryProto e;
    e.set_dtype(tfproto::DT_FLOAT);
    e.mutable_shape()->add_dim()->set_size(6);
    for (auto [start, length] : extents) {
      auto* x = e.add_slices()->add_extent();
      x->set_start(start);
      x->set_length(length);
    }
    return e;
  };
  auto bundle_of = [&](tfproto::BundleEntryProto whole, std::vector<std::pair<int64_t, int64_t>> parts) {
    std::vector<std::pair<std::string, tfproto::BundleEntryProto>> entries = {{"v", whole}};
    int64_t offset = 0;
    for (auto [start, length] : parts) {
      BundleSlice s{{start}, {length}};
      entries.push_back({EncodeTensorNameSlice("v", s), FloatEntry({length}, offset, (offset == 0 ? a : b))});
      offset += 12;
    }
    return TensorBundle::FromIndex(IndexOf(1, entries), "v.index",
                                   std::make_unique<MemoryShards>(std::vector<std::string>{a + b}));
  };
  auto good = bundle_of(sliced({{0, 3}, {3, 3}}), {{0, 3}, {3, 3}});
  ASSERT_TRUE(good.ok()) << good.status().message();
  auto v = good->Read("v");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->flat<float>()[5], 6.0f);

  auto overlap = bundle_of(sliced({{0, 3}, {2, 3}}), {{0, 3}, {2, 3}});
  ASSERT_TRUE(overlap.ok());
  auto r = overlap->Read("v");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("overlap"));

  auto missing = bundle_of(sliced({{0, 3}, {3, 3}}), {{0, 3}});
  ASSERT_TRUE(missing.ok());
  r = missing->Read("v");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("expected its entry in the index"));

  // Two slices stored over the same bytes make a tensor larger than the shard.
  {
    BundleSlice s0{{0}, {3}}, s1{{3}, {3}};
    tfproto::BundleEntryProto whole = sliced({{0, 3}, {3, 3}});
    auto e0 = FloatEntry({3}, 0, a), e1 = FloatEntry({3}, 0, a);
    auto shared = TensorBundle::FromIndex(
        IndexOf(1, {{"v", whole}, {EncodeTensorNameSlice("v", s0), e0}, {EncodeTensorNameSlice("v", s1), e1}}),
        "v.index", std::make_unique<MemoryShards>(std::vector<std::string>{a}));
    ASSERT_TRUE(shared.ok()) << shared.status().message();
    r = shared->Read("v");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr("expected at most the 12 bytes its 1 shard hold"));
  }

  auto outside = bundle_of(sliced({{4, 3}}), {});
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("expected within dimension 0 of size 6"));
}

TEST(TensorBundleTest, MissingShardIsNamed) {
  auto bundle = TensorBundle::Open(kSmall);
  ASSERT_TRUE(bundle.ok());
  auto elsewhere = TensorBundle::Open("/nonexistent/variables");
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_THAT(elsewhere.status().message(), AllOf(StartsWith("/nonexistent/variables.index"),
                                                   HasSubstr("no such file")));
}

}  // namespace
}  // namespace xlens::graph
