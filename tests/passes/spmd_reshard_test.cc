#include "compiler/passes/spmd_reshard.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <random>

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

Tiling Parse(std::string_view text, int64_t rank, int64_t n) {
  return *Tiling::FromSharding(*HloSharding::Parse(text), rank, n);
}

// Reshards a value of `dims` from `from` to `to` and back to whole on every device: each device
// must end with the global value, so every piece under `to` was the right one. Returns the module
// for counting what the reshard used.
std::unique_ptr<HloModule> RoundTrip(const std::vector<int64_t>& dims, std::string_view from_text,
                                     std::string_view to_text, int64_t n) {
  Tiling from = Parse(from_text, dims.size(), n);
  Tiling to = Parse(to_text, dims.size(), n);
  std::vector<int64_t> piece = from.TileDims(dims);
  auto module = ParseModuleOrDie(fmt::format(R"(HloModule m, num_partitions={}
ENTRY e {{
  ROOT p = f32[{}] parameter(0)
}})", n, fmt::join(piece, ",")));
  HloComputation* entry = module->entry_computation();
  std::vector<std::string> decisions;
  SpmdBuilder b(*module, entry, n, decisions);
  HloInstruction* x = b.Reshard(entry->parameter_instruction(0), from, to, dims, "%p");
  EXPECT_EQ(x->shape().dimensions(), to.TileDims(dims)) << from_text << " -> " << to_text;
  HloInstruction* whole = b.Reshard(x, to, Tiling::Replicated(dims.size(), n), dims, "%x");
  entry->set_root_instruction(whole);

  std::mt19937_64 rng(3);
  Literal global = *MakeRandomLiteral(Shape(PrimitiveType::F32, dims), rng);
  auto pieces = SplitLiteral(global, from.ToSharding(), n);
  EXPECT_TRUE(pieces.ok()) << pieces.status().message();
  std::vector<std::vector<Literal>> args(n);
  for (int64_t d = 0; d < n; ++d) args[d].push_back(std::move((*pieces)[d]));
  auto results = EvaluateModuleOnDevices(*module, args, DeviceTopology{1, n});
  EXPECT_TRUE(results.ok()) << results.status().message() << "\n" << PrintModule(*module);
  if (!results.ok()) return module;
  for (int64_t d = 0; d < n; ++d) {
    Status same = ExpectLiteralNear(global, (*results)[d], ErrorSpec{0, 0});
    EXPECT_TRUE(same.ok()) << from_text << " -> " << to_text << ": device " << d << ": "
                           << same.message() << "\n" << PrintModule(*module);
  }
  return module;
}

TEST(SpmdReshardTest, EveryPairOfTilingsRoundTrips) {
  const std::vector<std::string> tilings = {
      "{replicated}",
      "{devices=[4,1]<=[4]}",
      "{devices=[1,4]<=[4]}",
      "{devices=[4,1]3,1,0,2}",
      "{devices=[2,2]<=[4]}",
      "{devices=[2,2]<=[2,2]T(1,0)}",
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
  };
  // 6 rows do not divide into 4 tiles: the last tile is short and padded.
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{8, 12}, std::vector<int64_t>{6, 8}}) {
    for (const std::string& from : tilings) {
      for (const std::string& to : tilings) RoundTrip(dims, from, to, 4);
    }
  }
}

TEST(SpmdReshardTest, TheCheapestMoveIsChosen) {
  // Cutting what a device holds whole is local.
  auto slice = RoundTrip({8, 12}, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", "{devices=[4,1]<=[4]}", 4);
  EXPECT_EQ(CountOpcode(*slice, HloOpcode::kAllGather), 1);  // only the way back
  // Moving the tiles from rows to columns in place is one all-to-all.
  auto moved = RoundTrip({8, 12}, "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", 4);
  EXPECT_EQ(CountOpcode(*moved, HloOpcode::kAllToAll), 1);
  EXPECT_EQ(CountOpcode(*moved, HloOpcode::kAllGather), 1);  // only the way back
}

}  // namespace
}  // namespace xlens
