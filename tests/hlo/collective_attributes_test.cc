// Replica groups in both of XLA's forms, source-target pairs, group modes, and which devices meet
// in a collective; every malformed attribute is one error naming the instruction.
#include "compiler/hlo/collective_attributes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Groups = std::vector<std::vector<int64_t>>;

TEST(CollectiveAttributesTest, ReadsTheListForm) {
  EXPECT_EQ(*ParseReplicaGroups("{{0,1},{2,3}}"), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(*ParseReplicaGroups("{ {3, 1} , {0,2} }"), (Groups{{3, 1}, {0, 2}}));
  EXPECT_TRUE(ParseReplicaGroups("{}")->empty());
  EXPECT_EQ(ReplicaGroupsToString({{0, 1}, {2, 3}}), "{{0,1},{2,3}}");
}

// The iota form's ids, computed here from its definition: the transposed array's element at
// index i is the original's at perm^-1, whose row-major offset is the id.
Groups IotaGroups(int64_t groups, int64_t size, std::vector<int64_t> dims,
                  std::vector<int64_t> perm) {
  std::vector<int64_t> transposed_dims;
  for (int64_t p : perm) transposed_dims.push_back(dims[p]);
  std::vector<int64_t> ids;
  std::vector<int64_t> index(dims.size(), 0);
  const int64_t total = groups * size;
  for (int64_t n = 0; n < total; ++n) {
    std::vector<int64_t> original(dims.size());
    for (size_t d = 0; d < perm.size(); ++d) original[perm[d]] = index[d];
    int64_t id = 0;
    for (size_t d = 0; d < dims.size(); ++d) id = id * dims[d] + original[d];
    ids.push_back(id);
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++index[d] < transposed_dims[d]) break;
      index[d] = 0;
    }
  }
  Groups out;
  for (int64_t g = 0; g < groups; ++g) out.emplace_back(ids.begin() + g * size, ids.begin() + (g + 1) * size);
  return out;
}

TEST(CollectiveAttributesTest, ReadsTheIotaForm) {
  EXPECT_EQ(*ParseReplicaGroups("[2,2]<=[4]"), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(*ParseReplicaGroups("[1,4]<=[4]"), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(*ParseReplicaGroups("[2,2]<=[2,2]T(1,0)"), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(*ParseReplicaGroups("[4,2]<=[2,2,2]T(2,1,0)"), (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  EXPECT_EQ(*ParseReplicaGroups("[4,2]<=[2,2,2]T(2,1,0)"), IotaGroups(4, 2, {2, 2, 2}, {2, 1, 0}));
  EXPECT_EQ(*ParseReplicaGroups("[2,4]<=[4,2]T(1,0)"), IotaGroups(2, 4, {4, 2}, {1, 0}));
  EXPECT_EQ(*ParseReplicaGroups("[8,2]<=[2,4,2]T(1,2,0)"), IotaGroups(8, 2, {2, 4, 2}, {1, 2, 0}));
}

TEST(CollectiveAttributesTest, ReadsTheMeshAxesForm) {
  // The mesh [a=2, b=4] holds device 4a + b.
  EXPECT_EQ(*ParseReplicaGroups("mesh['a'=2,'b'=4] {'b'}"), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(*ParseReplicaGroups("mesh['a'=2,'b'=4] {'a'}"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(*ParseReplicaGroups("mesh['a'=2,'b'=4] {'b','a'}"), (Groups{{0, 4, 1, 5, 2, 6, 3, 7}}));
  EXPECT_EQ(*ParseReplicaGroups("mesh['a'=2,'b'=4] {}"), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(*ParseReplicaGroups("mesh['axis_0'=4,'axis_1'=1] {'axis_0'}"), (Groups{{0, 1, 2, 3}}));
  // x=8 read as [2,2,2] (id 4i + 2j + k); the sub-axis :(2)2 is j.
  EXPECT_EQ(*ParseReplicaGroups("mesh['x'=8] {'x':(2)2}"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  // Explicit device ids: the mesh holds [[0,2],[1,3]].
  EXPECT_EQ(*ParseReplicaGroups("mesh['a'=2,'b'=2], device_ids=([2,2]<=[2,2]T(1,0)) {'b'}"),
            (Groups{{0, 2}, {1, 3}}));
  for (const char* bad : {"mesh['a'=2] {'c'}", "mesh['a'=2,'a'=2] {'a'}", "mesh['a'=2] {'a','a'}",
                          "mesh['a'=0] {'a'}", "mesh['a'=4] {'a':(3)2}", "mesh['a'=2 {'a'}",
                          "mesh['a'=2], device_ids=([3]<=[3]) {'a'}"}) {
    auto groups = ParseReplicaGroups(bad);
    EXPECT_FALSE(groups.ok()) << bad;
  }
}

TEST(CollectiveAttributesTest, RefusesMalformedGroupsSayingWhy) {
  for (const char* text : {"[2,3]<=[4]", "[2,2]<=[2,2]T(0,0)", "[2,2]<=[2,2]T(1)", "[4]<=[4]",
                           "{{0,1},{2}", "{0,1}", "[2,2]<=[4] junk", "{{a}}", "[2,2]<=[0,4]"}) {
    auto groups = ParseReplicaGroups(text);
    ASSERT_FALSE(groups.ok()) << text;
    EXPECT_THAT(groups.status().message(), HasSubstr("replica_groups=")) << text;
  }
}

TEST(CollectiveAttributesTest, TextThatDoesNotReadIsQuotedEscaped) {
  // Raw control bytes from a module reach the terminal only escaped.
  auto groups = ParseReplicaGroups("{{0,1\x1b[2J\x07}}");
  ASSERT_FALSE(groups.ok());
  EXPECT_THAT(groups.status().message(), HasSubstr("replica_groups={{0,1\\x1b[2J\\x07}}"));
  auto pairs = ParseSourceTargetPairs("{{0,1\x1b}}");
  ASSERT_FALSE(pairs.ok());
  EXPECT_THAT(pairs.status().message(), HasSubstr("source_target_pairs={{0,1\\x1b}}"));
  auto mesh = ParseReplicaGroups("mesh['x'=2] {'\x1bZ'}");
  ASSERT_FALSE(mesh.ok());
  EXPECT_THAT(mesh.status().message(), HasSubstr("axis '\\x1bZ' is not in the mesh"));
  for (const auto& status : {groups.status(), pairs.status(), mesh.status()}) {
    EXPECT_EQ(status.message().find('\x1b'), std::string::npos) << status.message();
  }
}

TEST(CollectiveAttributesTest, ReadsSourceTargetPairs) {
  auto pairs = ParseSourceTargetPairs("{{0,1},{1,2},{2,0}}");
  ASSERT_TRUE(pairs.ok());
  EXPECT_THAT(*pairs, ElementsAre(std::pair<int64_t, int64_t>{0, 1}, std::pair<int64_t, int64_t>{1, 2},
                                  std::pair<int64_t, int64_t>{2, 0}));
  EXPECT_FALSE(ParseSourceTargetPairs("{{0,1,2}}").ok());
  EXPECT_FALSE(ParseSourceTargetPairs("{{0}}").ok());
}

TEST(CollectiveAttributesTest, GroupModesFollowXlasTable) {
  EXPECT_EQ(*GetCollectiveOpGroupMode(false, std::nullopt), CollectiveOpGroupMode::kCrossReplica);
  EXPECT_EQ(*GetCollectiveOpGroupMode(false, false), CollectiveOpGroupMode::kCrossReplica);
  EXPECT_FALSE(GetCollectiveOpGroupMode(false, true).ok());
  EXPECT_EQ(*GetCollectiveOpGroupMode(true, std::nullopt), CollectiveOpGroupMode::kCrossPartition);
  EXPECT_EQ(*GetCollectiveOpGroupMode(true, false),
            CollectiveOpGroupMode::kCrossReplicaAndPartition);
  EXPECT_EQ(*GetCollectiveOpGroupMode(true, true), CollectiveOpGroupMode::kFlattenedId);
}

// A module whose entry holds `instruction` (named %c) over an f32[4] parameter %p.
std::unique_ptr<HloModule> ModuleWith(const std::string& instruction) {
  const std::string text = R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT )" + instruction + "\n}\n";
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(*module) : nullptr;
}

const HloInstruction& Root(const HloModule& module) {
  return *module.entry_computation()->root_instruction();
}

StatusOr<Groups> GroupsOf(const std::string& instruction, DeviceTopology topology) {
  auto module = ModuleWith(instruction);
  if (!module) return Error("no module");
  return ParticipatingDeviceGroups(Root(*module), topology);
}

TEST(CollectiveAttributesTest, ParticipatingDevicesPerGroupMode) {
  const DeviceTopology two_by_two{2, 2};  // device = replica * 2 + partition
  // Cross-replica: the replicas of each partition meet.
  EXPECT_EQ(*GroupsOf("c = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add", two_by_two),
            (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(*GroupsOf("c = f32[4] all-reduce(p), replica_groups={}, to_apply=add", two_by_two),
            (Groups{{0, 2}, {1, 3}}));
  // Cross-replica-and-partition: every partition of the group's replicas.
  EXPECT_EQ(*GroupsOf("c = f32[4] all-reduce(p), channel_id=1, replica_groups={{0},{1}}, "
                      "to_apply=add", two_by_two),
            (Groups{{0, 1}, {2, 3}}));
  // Flattened ids: the ids are devices.
  EXPECT_EQ(*GroupsOf("c = f32[4] all-reduce(p), channel_id=1, replica_groups={{0,3},{1,2}}, "
                      "use_global_device_ids=true, to_apply=add", two_by_two),
            (Groups{{0, 3}, {1, 2}}));
  EXPECT_EQ(*GroupsOf("c = f32[4] all-reduce(p), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), "
                      "use_global_device_ids=true, to_apply=add", two_by_two),
            (Groups{{0, 2}, {1, 3}}));
  // Cross-partition (all-to-all has no use_global_device_ids): the partitions of each replica.
  EXPECT_EQ(*GroupsOf("c = f32[4] all-to-all(p), channel_id=1, replica_groups={{1,0}}, "
                      "dimensions={0}", two_by_two),
            (Groups{{1, 0}, {3, 2}}));
}

TEST(CollectiveAttributesTest, MalformedGroupsAreOneErrorNamingTheInstruction) {
  const DeviceTopology four{4, 1};
  struct Case {
    std::string instruction;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"c = f32[4] all-reduce(p), replica_groups={{0,1},{2,4}}, to_apply=add", "replica 4"},
           {"c = f32[4] all-reduce(p), replica_groups={{0,1},{1,2,3}}, to_apply=add", "two groups"},
           {"c = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add", "leaves out replicas 2, 3"},
           {"c = f32[8] all-gather(p), replica_groups={{0},{1,2,3}}, dimensions={0}", "one size"},
           {"c = f32[4] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
            "to_apply=add", "channel_id"},
           {"c = f32[4] all-reduce(p), channel_id=1, use_global_device_ids=true, to_apply=add",
            "needs replica_groups"},
           {"c = f32[4] all-reduce(p), replica_groups=[2,2]<=[5], to_apply=add", "replica_groups="},
           {"c = f32[4] all-reduce(p), channel_id=x, to_apply=add", "channel_id=x"},
       }) {
    auto groups = GroupsOf(c.instruction, four);
    ASSERT_FALSE(groups.ok()) << c.instruction;
    EXPECT_THAT(groups.status().message(), HasSubstr("%c")) << c.instruction;
    EXPECT_THAT(groups.status().message(), HasSubstr(c.expected)) << c.instruction;
  }
}

TEST(CollectiveAttributesTest, PermuteSourcesAndTheirErrors) {
  auto module = ModuleWith("c = f32[4] collective-permute(p), source_target_pairs={{0,1},{1,2}}");
  auto sources = PermuteSources(Root(*module), DeviceTopology{4, 1});
  ASSERT_TRUE(sources.ok()) << sources.status().message();
  EXPECT_THAT(*sources, ElementsAre(-1, 0, 1, -1));
  // With a channel, the pairs are partition ids within each replica.
  module = ModuleWith("c = f32[4] collective-permute(p), channel_id=2, source_target_pairs={{0,1}}");
  sources = PermuteSources(Root(*module), DeviceTopology{2, 2});
  ASSERT_TRUE(sources.ok());
  EXPECT_THAT(*sources, ElementsAre(-1, 0, -1, 2));

  for (const auto& [pairs, expected] : std::vector<std::pair<std::string, std::string>>{
           {"{{0,1},{0,2}}", "source twice"}, {"{{0,1},{2,1}}", "twice"}, {"{{0,9}}", "9"}}) {
    module = ModuleWith("c = f32[4] collective-permute(p), source_target_pairs=" + pairs);
    auto bad = PermuteSources(Root(*module), DeviceTopology{4, 1});
    ASSERT_FALSE(bad.ok()) << pairs;
    EXPECT_THAT(bad.status().message(), HasSubstr("%c")) << pairs;
    EXPECT_THAT(bad.status().message(), HasSubstr(expected)) << pairs;
  }
}

TEST(CollectiveAttributesTest, ModuleCheckRefusesAChannelUsedTwice) {
  auto module = ParseHloModule(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] all-reduce(p), channel_id=7, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  ROOT b = f32[4] all-reduce(a), channel_id=7, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  Status status = CheckModuleCollectives(**module, DeviceTopology{2, 1});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("channel_id=7"));
  EXPECT_THAT(status.message(), HasSubstr("%a"));
  EXPECT_THAT(status.message(), HasSubstr("%b"));
}

TEST(CollectiveAttributesTest, ModuleCheckSaysWhatTheHeaderSays) {
  auto module = ParseHloModule(R"(HloModule m, num_partitions=4
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT a = f32[4] all-reduce(p), channel_id=1, replica_groups=[1,4]<=[4], use_global_device_ids=true, to_apply=add
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  Status status = CheckModuleCollectives(**module, DeviceTopology{});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("device 1"));
  EXPECT_THAT(status.message(), HasSubstr("header says num_partitions=4"));
  EXPECT_TRUE(CheckModuleCollectives(**module, DeviceTopology{1, 4}).ok());
}

}  // namespace
}  // namespace xlens
