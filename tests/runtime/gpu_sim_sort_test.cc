// The GPU sort kernel (a bitonic network, codegen/gpu/gpu_sort_emitter.h) against the reference
// evaluator's stable sort, on the GPU simulator with its race check on: row lengths that are
// and are not powers of two (and longer than one block's tile, so both the in-tile and the
// global stages run), each dimension of a rank-3 array, key/value operands of different types,
// descending order, and ties (the result must be the stable one).
#include <random>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/random_literal.h"
#include "gpu_sim_test_util.h"

namespace xlens::runtime {
namespace {

using testing::RunOnSimulatorAndEvaluator;

std::unique_ptr<GpuSimDevice> OpenDevice(bool race_check) {
  GpuSimOptions options;
  options.race_check = race_check;
  auto device = OpenSimulatedGpuDevice(options);
  return device.ok() ? std::move(*device) : nullptr;
}

// Sorts `shape` (keys f32, values s32) along `dimension`, by `direction`; both outputs checked.
void CheckKeyValueSort(const std::string& dims, const std::vector<int64_t>& sizes,
                       int64_t dimension, const std::string& direction, bool few_distinct_keys,
                       bool race_check) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice(race_check);
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  const std::string text = fmt::format(R"(
HloModule sort
compare {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction={2}
}}
ENTRY e {{
  keys = f32[{0}] parameter(0)
  values = s32[{0}] parameter(1)
  ROOT s = (f32[{0}], s32[{0}]) sort(keys, values), dimensions={{{1}}}, to_apply=compare
}}
)", dims, dimension, direction);
  std::mt19937_64 rng(static_cast<uint64_t>(dimension * 100 + sizes.size()));
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> keys(n);
  std::vector<int32_t> values(n);
  std::uniform_real_distribution<float> uniform(-100, 100);
  std::uniform_int_distribution<int> small(0, 3);
  for (int64_t i = 0; i < n; ++i) {
    // Few distinct keys: many ties, which only the stable order resolves like the evaluator.
    keys[i] = few_distinct_keys ? static_cast<float>(small(rng)) : uniform(rng);
    values[i] = static_cast<int32_t>(i);
  }
  std::vector<Literal> args;
  Literal k(Shape(PrimitiveType::F32, sizes));
  std::memcpy(k.untyped_data(), keys.data(), n * 4);
  Literal v(Shape(PrimitiveType::S32, sizes));
  std::memcpy(v.untyped_data(), values.data(), n * 4);
  args.push_back(std::move(k));
  args.push_back(std::move(v));
  auto both = RunOnSimulatorAndEvaluator(text, args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  Status match = ExpectLiteralNear(both->expected, both->actual, ErrorSpec{0, 0});
  EXPECT_TRUE(match.ok()) << match.message();
}

TEST(GpuSimSortTest, PowerOfTwoRowsWithTheRaceCheck) {
  CheckKeyValueSort("4,16", {4, 16}, 1, "LT", false, true);
}

TEST(GpuSimSortTest, RowsThatAreNotPowersOfTwoWithTheRaceCheck) {
  CheckKeyValueSort("3,37", {3, 37}, 1, "LT", false, true);
}

TEST(GpuSimSortTest, RowsLongerThanOneBlockTile) {
  // 1000 elements pad to 1024: a tile of 512, then a global mirror stage and the rest in tile.
  CheckKeyValueSort("2,1000", {2, 1000}, 1, "GT", false, false);
}

TEST(GpuSimSortTest, TilesWhollyPastTheEndOfARowWithTheRaceCheck) {
  // 1100 pads to 2048: the row's last tile of 512 starts past its end and holds nothing.
  CheckKeyValueSort("2,1100", {2, 1100}, 1, "LT", false, true);
}

TEST(GpuSimSortTest, EveryDimensionOfARank3Array) {
  for (int64_t d = 0; d < 3; ++d) {
    SCOPED_TRACE(d);
    CheckKeyValueSort("5,6,7", {5, 6, 7}, d, "LT", false, d == 0);
  }
}

TEST(GpuSimSortTest, TiesKeepTheirOrderAsAStableSortDoes) {
  CheckKeyValueSort("2,300", {2, 300}, 1, "LT", true, false);
}

TEST(GpuSimSortTest, ThreeOperandsOfDifferentTypesAndALayout) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice(true);
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  // Sorted by (s8 key descending, then f64 key ascending), carrying a pred; the keys' layout is
  // column-major.
  const std::string text = R"(
HloModule sort3
compare {
  a = s8[] parameter(0)
  b = s8[] parameter(1)
  c = f64[] parameter(2)
  d = f64[] parameter(3)
  e = pred[] parameter(4)
  f = pred[] parameter(5)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(c, d), direction=LT
  tie = pred[] and(eq, lt)
  ROOT r = pred[] or(gt, tie)
}
ENTRY e {
  k = s8[6,21]{0,1} parameter(0)
  x = f64[6,21] parameter(1)
  p = pred[6,21] parameter(2)
  ROOT s = (s8[6,21], f64[6,21], pred[6,21]) sort(k, x, p), dimensions={1}, is_stable=true, to_apply=compare
}
)";
  std::mt19937_64 rng(7);
  std::vector<Literal> args;
  for (PrimitiveType t : {PrimitiveType::S8, PrimitiveType::F64, PrimitiveType::PRED}) {
    Shape shape(t, {6, 21});
    auto literal = MakeRandomLiteral(shape, rng);
    ASSERT_TRUE(literal.ok()) << literal.status().message();
    args.push_back(std::move(*literal));
  }
  auto both = RunOnSimulatorAndEvaluator(text, args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  Status match = ExpectLiteralNear(both->expected, both->actual, ErrorSpec{0, 0});
  EXPECT_TRUE(match.ok()) << match.message();
}

}  // namespace
}  // namespace xlens::runtime
