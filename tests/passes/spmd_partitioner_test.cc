#include "compiler/passes/spmd_partitioner.h"

#include <gtest/gtest.h>

#include <random>

#include <fmt/format.h>

#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/hlo/sharded_literals.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;

// Partitions `text` for `n` devices and checks, on random global inputs split by the parameters'
// shardings, that every device's result is its piece of what the unpartitioned module computes
// on one device (assembled by the root's sharding).
std::unique_ptr<HloModule> PartitionAndCheck(const std::string& text, int64_t n,
                                             int64_t replicas = 1) {
  auto oracle = ParseModuleOrDie(text);
  auto module = ParseModuleOrDie(text);
  SpmdPartitioner partitioner;
  auto changed = RunPassChecked(partitioner, *module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  if (!changed.ok()) return module;
  std::mt19937_64 rng(7);
  std::vector<Literal> globals;
  for (const HloInstruction* p : oracle->entry_computation()->parameter_instructions()) {
    globals.push_back(*MakeRandomLiteral(p->shape(), rng));
  }
  auto expected = EvaluateModule(*oracle, globals);
  EXPECT_TRUE(expected.ok()) << expected.status().message();
  auto shardings = EntryParameterShardings(*module);
  EXPECT_TRUE(shardings.ok());
  // Device r * n + p is partition p of replica r; every replica gets the same pieces.
  std::vector<std::vector<Literal>> per_device(replicas * n);
  for (size_t i = 0; i < globals.size(); ++i) {
    auto pieces = SplitLiteral(globals[i], (*shardings)[i], n);
    EXPECT_TRUE(pieces.ok()) << pieces.status().message();
    for (int64_t d = 0; d < replicas * n; ++d) per_device[d].push_back((*pieces)[d % n]);
  }
  DeviceTopology topology{replicas, n};
  auto results = EvaluateModuleOnDevices(*module, per_device, topology);
  EXPECT_TRUE(results.ok()) << results.status().message() << "\n" << PrintModule(*module);
  if (!results.ok()) return module;
  auto root = EntryRootSharding(*module);
  EXPECT_TRUE(root.ok());
  for (int64_t r = 0; r < replicas; ++r) {
    std::vector<Literal> replica(results->begin() + r * n, results->begin() + (r + 1) * n);
    auto assembled =
        AssembleLiteral(replica, *root, oracle->entry_computation()->root_instruction()->shape());
    EXPECT_TRUE(assembled.ok()) << assembled.status().message() << "\n" << PrintModule(*module);
    if (assembled.ok()) {
      Status near = ExpectLiteralNear(*expected, *assembled, ErrorSpec{1e-4, 1e-4});
      EXPECT_TRUE(near.ok()) << "replica " << r << ": " << near.message() << "\n"
                             << PrintModule(*module);
    }
  }
  return module;
}

// `text` with the `add` reducer its reductions and scatters apply, after its HloModule line.
std::string WithAdd(const std::string& text) {
  const size_t header_end = text.find('\n') + 1;
  return text.substr(0, header_end) + R"(add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)" + text.substr(header_end);
}

// Megatron's second layer on 4 partitions (`header`: the HloModule line): x (f32[8,32], cut 2x2)
// times w (f32[32,16], its rows cut over the pairs {0,1} and {2,3}), so that the contracting dim
// is tiled and each device holds a partial product. `d` names the product ("ROOT d" when it is
// the result), `d_sharding` is the one asked for it, and `rest` holds the entry's further lines.
std::string RowParallelDot(const std::string& header, const std::string& d,
                           const std::string& d_sharding, const std::string& rest = "") {
  return header + R"(
ENTRY e {
  x = f32[8,32] parameter(0), sharding={devices=[2,2]<=[4]}
  w = f32[32,16] parameter(1), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  )" + d + " = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding=" +
         d_sharding + "\n" + rest + "}\n";
}

TEST(SpmdPartitionerTest, ElementwiseOnTiledOperandsStaysLocal) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
ENTRY e {
  a = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[8,6] parameter(1), sharding={devices=[4,1]<=[4]}
  c = f32[] constant(2)
  cb = f32[8,6] broadcast(c), dimensions={}
  m = f32[8,6] multiply(a, cb)
  ROOT r = f32[8,6] add(m, b), sharding={devices=[4,1]<=[4]}
})", 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(m->entry_computation()->parameter_instruction(0)->shape().dimensions(0), 2);
}

TEST(SpmdPartitionerTest, RowParallelDotAllReducesPartialSums) {
  // Megatron's second layer: the contracting dim is tiled over 'model', so each device computes
  // a partial product and the partial sums meet in an all-reduce over {0,1} and {2,3}.
  auto m = PartitionAndCheck(RowParallelDot("HloModule m, num_partitions=4", "ROOT d",
                                            "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
                             4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 1);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
}

TEST(SpmdPartitionerTest, PartialSumsWantedCutAreReduceScattered) {
  // Contracting dims tiled over {0,1} and {2,3}, the result wanted cut by columns across the same
  // pairs: each device keeps only its part of the sum.
  auto m = PartitionAndCheck(
      RowParallelDot("HloModule m, num_partitions=4", "ROOT d", "{devices=[2,2]<=[4]}"), 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kReduceScatter), 1);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 0);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kDynamicSlice), 0);
}

TEST(SpmdPartitionerTest, EachReplicaMeetsOnlyItsOwnPartitions) {
  // Two replicas of four partitions: the all-reduce's and all-gather's groups name global device
  // ids once per replica, the all-to-all's partition ids.
  auto m = PartitionAndCheck(RowParallelDot("HloModule m, num_partitions=4, replica_count=2", "d",
                                            "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", R"(
  y = f32[8,16] parameter(2), sharding={devices=[1,4]<=[4]}
  a = f32[8,16] add(d, y), sharding={devices=[4,1]<=[4]}
  ROOT g = f32[8,16] copy(a), sharding={replicated}
)"),
                             4, 2);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 1);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllToAll), 1);
}

TEST(SpmdPartitionerTest, ColumnParallelDotTakesItsShardingFromBothOperands) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,16] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  w = f32[16,32] parameter(1), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  d = f32[8,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[8,32] broadcast(z), dimensions={}
  ROOT r = f32[8,32] maximum(d, zb)
})", 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 0);
}

TEST(SpmdPartitionerTest, BatchDotTransposeReshapeAndUnevenReduce) {
  PartitionAndCheck(WithAdd(R"(HloModule m, num_partitions=4
ENTRY e {
  q = f32[4,6,8] parameter(0), sharding={devices=[4,1,1]<=[4]}
  k = f32[4,6,8] parameter(1), sharding={devices=[4,1,1]<=[4]}
  s = f32[4,6,6] dot(q, k), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  t = f32[6,4,6] transpose(s), dimensions={1,0,2}
  r = f32[6,24] reshape(t)
  sl = f32[5,24] slice(r), slice={[0:5], [0:24]}
  z = f32[] constant(0)
  ROOT sum = f32[24] reduce(sl, z), dimensions={0}, to_apply=add, sharding={replicated}
})"), 4);
}

TEST(SpmdPartitionerTest, UnevenTilesAreMaskedBeforeTheReduction) {
  auto m = PartitionAndCheck(WithAdd(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  s = f32[7,6] slice(x), slice={[0:7], [0:6]}
  c = f32[7,6] cosine(s), sharding={devices=[4,1]<=[4]}
  z = f32[] constant(0)
  ROOT r = f32[6] reduce(c, z), dimensions={0}, to_apply=add, sharding={replicated}
})"), 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kSelect), 1);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 1);
}

TEST(SpmdPartitionerTest, ReshardsBetweenDimsAndRunsOtherOpsWhole) {
  PartitionAndCheck(R"(HloModule m, num_partitions=2
ENTRY e {
  x = f32[4,6] parameter(0), sharding={devices=[2,1]<=[2]}
  y = f32[4,6] parameter(1), sharding={devices=[1,2]<=[2]}
  a = f32[4,6] add(x, y), sharding={devices=[1,2]<=[2]}
  ROOT s = f32[4,6] sort(a), dimensions={1}, to_apply=lt, sharding={devices=[2,1]<=[2]}
}
lt {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=LT
})", 2);
}

TEST(SpmdPartitionerTest, ConvolutionSplitsImagesByBatchAndKernelsByOutputFeature) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[4,6,6,3] parameter(0), sharding={devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}
  k = f32[3,3,3,8] parameter(1), sharding={devices=[1,1,1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  ROOT c = f32[4,6,6,8] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, sharding={devices=[2,1,1,2]<=[4]}
})", 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kDynamicSlice), 0);
}

TEST(SpmdPartitionerTest, GatherSplitsItsIndicesAndKeepsTheTableWhole) {
  // An embedding lookup: the token ids are cut by batch, the table replicated; every device looks
  // up its own tokens and nothing moves between devices.
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=2
ENTRY e {
  table = f32[10,4] parameter(0), sharding={replicated}
  ids = s32[6,1] constant({{3},{0},{9},{9},{2},{5}})
  ROOT g = f32[6,4] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={devices=[2,1]<=[2]}
})", 2);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(m->entry_computation()->root_instruction()->shape().dimensions(0), 3);
}

TEST(SpmdPartitionerTest, MovingTheTiledDimIsOneAllToAll) {
  for (const char* x_sharding : {"{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"}) {
    std::string y_sharding = std::string(x_sharding) == "{devices=[4,1]<=[4]}" ? "{devices=[1,4]<=[4]}"
                                                                             : "{devices=[4,1]<=[4]}";
    auto m = PartitionAndCheck(std::string(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,12] parameter(0), sharding=)") + x_sharding + R"(
  y = f32[8,12] parameter(1), sharding=)" + y_sharding + R"(
  ROOT a = f32[8,12] add(x, y), sharding=)" + y_sharding + R"(
})", 4);
    EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllToAll), 1) << x_sharding;
    EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0) << x_sharding;
  }
}

// The collectives of `computation` with opcode `op`.
int64_t CountIn(const HloComputation* computation, HloOpcode op) {
  int64_t count = 0;
  for (const HloInstruction* i : computation->instructions()) count += i->opcode() == op;
  return count;
}

const HloInstruction* FindWhile(const HloModule& m) {
  for (const HloInstruction* i : m.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kWhile) return i;
  }
  return nullptr;
}

TEST(SpmdPartitionerTest, LoopsCarryTheirStateInPiecesAndAreCutAfter) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=2
cond {
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4,6] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[4,6] sine(v)
  ROOT t = (s32[], f32[4,6]) tuple(j, w)
}
ENTRY e {
  x = f32[4,6] parameter(0), sharding={devices=[2,1]<=[2]}
  y = f32[4,6] exponential(x)
  z = s32[] constant(0)
  t = (s32[], f32[4,6]) tuple(z, y)
  l = (s32[], f32[4,6]) while(t), condition=cond, body=body
  r = f32[4,6] get-tuple-element(l), index=1
  ROOT o = f32[4,6] negate(r), sharding={devices=[1,2]<=[2]}
})", 2);
  const HloInstruction* loop = FindWhile(*m);
  ASSERT_NE(loop, nullptr);
  // The state holds each device's rows; nothing is gathered for the loop.
  EXPECT_EQ(loop->shape().tuple_shapes(1).dimensions(0), 2);
  EXPECT_EQ(CountIn(loop->while_body(), HloOpcode::kAllGather), 0);
  EXPECT_EQ(CountIn(m->entry_computation(), HloOpcode::kAllGather), 0);
}

TEST(SpmdPartitionerTest, LoopBodiesSumTheirPartialProductsInside) {
  // A fori_loop of data-parallel steps: the weights replicated, the batch cut; each step's product
  // over the batch is all-reduced inside the body, with a channel of its own.
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
cond {
  s = (s32[], f32[3,2], f32[8,3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3,2], f32[8,3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  w = f32[3,2] get-tuple-element(s), index=1
  x = f32[8,3] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[8,2] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,2] tanh(h)
  g = f32[3,2] dot(x, t), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[] constant(0.1)
  cb = f32[3,2] broadcast(c), dimensions={}
  d = f32[3,2] multiply(g, cb)
  w2 = f32[3,2] subtract(w, d)
  ROOT r = (s32[], f32[3,2], f32[8,3]) tuple(j, w2, x)
}
ENTRY e {
  w = f32[3,2] parameter(0), sharding={replicated}
  x = f32[8,3] parameter(1), sharding={devices=[4,1]<=[4]}
  z = s32[] constant(0)
  t = (s32[], f32[3,2], f32[8,3]) tuple(z, w, x)
  l = (s32[], f32[3,2], f32[8,3]) while(t), condition=cond, body=body
  ROOT r = f32[3,2] get-tuple-element(l), index=1, sharding={replicated}
})", 4);
  const HloInstruction* loop = FindWhile(*m);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->shape().tuple_shapes(2).dimensions(0), 2);
  EXPECT_EQ(CountIn(loop->while_body(), HloOpcode::kAllReduce), 1);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
}

TEST(SpmdPartitionerTest, GatherFromATableCutByRowsMasksAndAllReduces) {
  // An embedding table cut by its vocabulary, 10 rows over 4 devices (the last piece short): each
  // device looks up the ids it holds, ids past either end clamped as a gather clamps them.
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
ENTRY e {
  table = f32[10,4] parameter(0), sharding={devices=[4,1]<=[4]}
  ids = s32[7,1] constant({{3},{0},{9},{12},{-2},{5},{8}})
  ROOT g = f32[7,4] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={replicated}
})", 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 1);
}

TEST(SpmdPartitionerTest, ScatterIntoATableCutByRowsStaysOnItsRows) {
  // The gradient of a lookup: updates added into the rows each device holds, repeated ids summed,
  // an id past the end skipped; nothing moves between devices.
  auto m = PartitionAndCheck(WithAdd(R"(HloModule m, num_partitions=4
ENTRY e {
  table = f32[10,4] parameter(0), sharding={devices=[4,1]<=[4]}
  ids = s32[6,1] constant({{3},{0},{9},{3},{11},{5}})
  updates = f32[6,4] parameter(1), sharding={replicated}
  ROOT s = f32[10,4] scatter(table, ids, updates), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add, sharding={devices=[4,1]<=[4]}
})"), 4);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllReduce), 0);
}

TEST(SpmdPartitionerTest, SlicesPadsAndConcatenationsExchangeHalos) {
  // 14 rows over 4 devices (pieces of 4, the last short): shifted slices and a pad take their
  // neighbours' rows by collective-permute; the concatenation's small operand lies further off.
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[14,3] parameter(0), sharding={devices=[4,1]<=[4]}
  a = f32[12,3] slice(x), slice={[2:14], [0:3]}
  b = f32[12,3] slice(x), slice={[0:12], [0:3]}
  d = f32[12,3] subtract(a, b)
  zero = f32[] constant(0)
  p = f32[14,3] pad(d, zero), padding=1_1x0_0
  s = f32[14,3] add(p, x)
  h = f32[3,3] slice(x), slice={[0:3], [0:3]}
  c = f32[17,3] concatenate(x, h), dimensions={0}
  ROOT t = (f32[14,3], f32[17,3]) tuple(s, c), sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}
})", 4);
  EXPECT_GE(CountOpcode(*m, HloOpcode::kCollectivePermute), 3);
  // Only what lies further than a neighbour is gathered: the rows the short slice takes for the
  // later devices, and the concatenation's small operand (as XLA's partitioner does).
  EXPECT_LE(CountOpcode(*m, HloOpcode::kAllGather), 2);
}

TEST(SpmdPartitionerTest, EveryLayoutOfAnMlpLayerMatchesOneDevice) {
  // A layer (dot, bias, tanh, transpose, reshape, row sums) under every combination of input,
  // weight and result shardings: propagation and resharding must agree with one device whatever
  // the user asked for, including layouts that make them move data.
  const std::vector<std::string> two_d = {
      "{replicated}", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", "{devices=[2,2]<=[4]}",
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"};
  const std::vector<std::string> one_d = {"{replicated}", "{devices=[4]<=[4]}",
                                          "{devices=[2,2]<=[4] last_tile_dim_replicate}"};
  // 6 rows: the row tiles are uneven, and the last one padded.
  for (int rows : {8, 6}) {
  for (const std::string& x : two_d) {
    for (const std::string& w : two_d) {
      for (const std::string& out : one_d) {
        SCOPED_TRACE(fmt::format("{} rows: {} {} {}", rows, x, w, out));
        auto dims = [&](std::string text) {
          for (auto [from, to] : {std::pair<std::string, std::string>{"f32[8,", fmt::format("f32[{},", rows)},
                                  {"f32[6,8]", fmt::format("f32[6,{}]", rows)},
                                  {"f32[6,2,4]", fmt::format("f32[6,2,{}]", rows / 2)}}) {
            for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1)) {
              text.replace(at, from.size(), to);
            }
          }
          return text;
        };
        PartitionAndCheck(dims(WithAdd(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,12] parameter(0), sharding=)" + x + R"(
  w = f32[12,6] parameter(1), sharding=)" + w + R"(
  b = f32[6] parameter(2), sharding={replicated}
  d = f32[8,6] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,6] broadcast(b), dimensions={1}
  h = f32[8,6] tanh(f32[8,6] add(d, bb))
  t = f32[6,8] transpose(h), dimensions={1,0}
  r = f32[6,2,4] reshape(t)
  z = f32[] constant(0)
  ROOT s = f32[6] reduce(r, z), dimensions={1,2}, to_apply=add, sharding=)" + out + R"(
})")), 4);
      }
    }
  }
  }
}

TEST(SpmdPartitionerTest, TupleParametersAreCutElementByElement) {
  PartitionAndCheck(R"(HloModule m, num_partitions=2
ENTRY e {
  p = (f32[4,6], f32[6]) parameter(0), sharding={{devices=[2,1]<=[2]}, {replicated}}
  a = f32[4,6] get-tuple-element(p), index=0
  b = f32[6] get-tuple-element(p), index=1
  bb = f32[4,6] broadcast(b), dimensions={1}
  ROOT n = f32[4,6] add(a, bb), sharding={devices=[1,2]<=[2]}
})", 2);
}

TEST(SpmdPartitionerTest, PoolingKeepsTheBatchCut) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=2
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[4,6,6,3] parameter(0), sharding={devices=[2,1,1,1]<=[2]}
  ninf = f32[] constant(-inf)
  ROOT p = f32[4,3,3,3] reduce-window(x, ninf), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max, sharding={devices=[2,1,1,1]<=[2]}
})", 2);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(m->entry_computation()->root_instruction()->shape().dimensions(0), 2);
}

TEST(SpmdPartitionerTest, GatherFromATableCutByColumnsStaysCut) {
  // The table's hidden dim is cut and every slice takes it whole: each device gathers its own
  // columns for every token.
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=2
ENTRY e {
  table = f32[10,4] parameter(0), sharding={devices=[1,2]<=[2]}
  ids = s32[6,1] parameter(1), sharding={replicated}
  c = s32[6,1] clamp(s32[] constant(0), ids, s32[] constant(9))
  ROOT g = f32[6,4] gather(table, c), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, sharding={devices=[1,2]<=[2]}
})", 2);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(m->entry_computation()->root_instruction()->shape().dimensions(1), 2);
}

TEST(SpmdPartitionerTest, PointwiseConvolutionKeepsTheImageCutByRows) {
  auto m = PartitionAndCheck(R"(HloModule m, num_partitions=2
ENTRY e {
  x = f32[2,8,6,3] parameter(0), sharding={devices=[1,2,1,1]<=[2]}
  k = f32[1,1,3,5] parameter(1), sharding={replicated}
  ROOT c = f32[2,8,6,5] convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f, sharding={devices=[1,2,1,1]<=[2]}
})", 2);
  EXPECT_EQ(CountOpcode(*m, HloOpcode::kAllGather), 0);
  EXPECT_EQ(m->entry_computation()->root_instruction()->shape().dimensions(1), 4);
}

TEST(SpmdPartitionerTest, OneDeviceIsLeftAlone) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  ROOT x = f32[4] parameter(0), sharding={replicated}
})");
  SpmdPartitioner partitioner;
  auto changed = RunPassChecked(partitioner, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace xlens
