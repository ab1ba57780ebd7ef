// NCCL through dlopen (compiler/runtime/nccl_library.h): without the library, one line naming it
// and what to install; XLA's element types and reduction computations map to NCCL's (and those
// NCCL cannot reduce do not); which collectives NCCL takes as whole-buffer calls (a gather or
// scatter along the dimension major in memory) and which go through the host. Where NCCL and a
// GPU are present, a communicator of one GPU is made, and one naming a GPU twice is refused (so
// R x P devices need R x P GPUs); skipped otherwise. The model of a collective's time between
// GPUs of an NVLink board is checked here too (gpu_collective_model.h).
#include "compiler/runtime/nccl_library.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_collective_model.h"
#include "compiler/runtime/gpu_collectives.h"
#include "tests/hlo/multi_device_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

TEST(NcclLibraryTest, AbsentIsOneLineNamingTheLibraryAndWhatToInstall) {
  auto library = LoadNcclFrom({"/nonexistent/libnccl.so.2", "libnccl-absent.so.2"});
  ASSERT_FALSE(library.ok());
  const std::string message = library.status().message();
  EXPECT_THAT(message, HasSubstr("no NCCL found"));
  EXPECT_THAT(message, HasSubstr("/nonexistent/libnccl.so.2"));
  EXPECT_THAT(message, HasSubstr("install libnccl2"));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// The CUDA toolkit's NCCL, where the toolkit ships one: found and every entry point resolved
// (no GPU needed to load it).
TEST(NcclLibraryTest, TheToolkitsNcclLoads) {
  if (!std::filesystem::exists("/usr/local/cuda/lib64/libnccl.so.2")) {
    GTEST_SKIP() << "/usr/local/cuda/lib64/libnccl.so.2 is absent";
  }
  auto library = LoadNcclFrom({"/usr/local/cuda/lib64/libnccl.so.2"});
  ASSERT_TRUE(library.ok()) << library.status().message();
  EXPECT_GE(library->version, 20700);  // ncclSend/ncclRecv came with 2.7
  EXPECT_NE(library->ncclSend, nullptr);
  EXPECT_NE(library->ncclCommInitAll, nullptr);
  EXPECT_THAT(CheckNccl(*library, 5, "ncclAllReduce").message(), HasSubstr("ncclAllReduce failed"));
  EXPECT_TRUE(CheckNccl(*library, 0, "ncclAllReduce").ok());
}

TEST(NcclLibraryTest, CandidatesTryTheSonameFirst) {
  std::vector<std::string> names = NcclCandidates();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "libnccl.so");
  EXPECT_NE(std::find(names.begin(), names.end(), "libnccl.so.2"), names.end());
}

TEST(NcclLibraryTest, TypesMapToNcclsValues) {
  EXPECT_EQ(NcclTypeOf(PrimitiveType::F32), NcclType::kFloat32);
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::F32)), 7);   // ncclFloat32
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::BF16)), 9);  // ncclBfloat16
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::F16)), 6);
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::F64)), 8);
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::S32)), 2);
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::U64)), 5);
  EXPECT_EQ(static_cast<int>(*NcclTypeOf(PrimitiveType::S8)), 0);
  EXPECT_EQ(NcclTypeOf(PrimitiveType::PRED), NcclType::kUint8);
  EXPECT_EQ(NcclTypeOf(PrimitiveType::F8E4M3FN), NcclType::kFloat8e4m3);
  EXPECT_EQ(NcclTypeOf(PrimitiveType::F8E5M2), NcclType::kFloat8e5m2);
  // No NCCL type reduces these.
  EXPECT_FALSE(NcclTypeOf(PrimitiveType::S16).has_value());
  EXPECT_FALSE(NcclTypeOf(PrimitiveType::U16).has_value());
  EXPECT_FALSE(NcclTypeOf(PrimitiveType::C64).has_value());
  EXPECT_FALSE(NcclTypeOf(PrimitiveType::S4).has_value());
}

std::unique_ptr<HloModule> Parse(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message() << "\n" << text;
  return module.ok() ? std::move(*module) : nullptr;
}

// A reducer `op` of two `type` scalars, in a module of its own.
std::optional<NcclOp> OpOf(const std::string& op, const std::string& type, bool swapped = false) {
  auto module = Parse(fmt::format("HloModule m\nENTRY r {{\n  x = {0}[] parameter(0)\n  y = {0}[] parameter(1)\n"
                                  "  ROOT z = {0}[] {1}({2})\n}}\n",
                                  type, op, swapped ? "y, x" : "x, y"));
  if (module == nullptr) return std::nullopt;
  return NcclOpOf(module->entry_computation(), *ParsePrimitiveType(type));
}

TEST(NcclLibraryTest, ReductionsMapToNcclsOps) {
  EXPECT_EQ(OpOf("add", "f32"), NcclOp::kSum);
  EXPECT_EQ(OpOf("add", "bf16", /*swapped=*/true), NcclOp::kSum);
  EXPECT_EQ(OpOf("multiply", "s32"), NcclOp::kProd);
  EXPECT_EQ(OpOf("maximum", "f64"), NcclOp::kMax);
  EXPECT_EQ(OpOf("minimum", "u32"), NcclOp::kMin);
  EXPECT_EQ(static_cast<int>(*OpOf("minimum", "f32")), 3);  // ncclMin
  // Over pred: or is the maximum, and the minimum; adding bools is not XLA's or.
  EXPECT_EQ(OpOf("or", "pred"), NcclOp::kMax);
  EXPECT_EQ(OpOf("and", "pred"), NcclOp::kMin);
  EXPECT_FALSE(OpOf("add", "pred").has_value());
  // Not a reduction NCCL has, or not a type it reduces.
  EXPECT_FALSE(OpOf("subtract", "f32").has_value());
  EXPECT_FALSE(OpOf("or", "s32").has_value());
  EXPECT_FALSE(OpOf("add", "s16").has_value());
  EXPECT_FALSE(OpOf("add", "c64").has_value());
  // add(x, x) is not a fold of two values.
  auto module = Parse("HloModule m\nENTRY r {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                      "  ROOT z = f32[] add(x, x)\n}\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(NcclOpOf(module->entry_computation(), PrimitiveType::F32).has_value());
}

// A subtraction, a reduction NCCL has no op for (add and max come with the reducers).
constexpr char kSubtract[] = R"(
sub {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] subtract(x, y)
}
)";

// The plan for the root of an entry computation holding `body`.
StatusOr<NcclPlan> PlanOf(const std::string& body) {
  auto module = xlens::testing::ParseWithReducers(std::string(kSubtract) + "ENTRY e {\n" + body + "\n}\n");
  if (module == nullptr) return Error("does not parse");
  return PlanNcclCollective(*module->entry_computation()->root_instruction());
}

TEST(NcclLibraryTest, WhichCollectivesAreWholeBufferCalls) {
  auto ar = PlanOf("  p = f32[4,6] parameter(0)\n  q = f32[3] parameter(1)\n"
                   "  ROOT a = (f32[4,6], f32[3]) all-reduce(p, q), replica_groups={}, to_apply=add");
  ASSERT_TRUE(ar.ok()) << ar.status().message();
  EXPECT_EQ(ar->kind, NcclPlan::Kind::kAllReduce);
  EXPECT_EQ(ar->type, NcclType::kFloat32);
  EXPECT_EQ(ar->op, NcclOp::kSum);
  EXPECT_EQ(ar->counts, (std::vector<int64_t>{24, 3}));
  EXPECT_FALSE(PlanOf("  p = f32[4] parameter(0)\n"
                      "  ROOT a = f32[4] all-reduce(p), replica_groups={}, to_apply=sub").ok());
  auto start = PlanOf("  p = f32[4] parameter(0)\n"
                      "  ROOT a = f32[4] all-reduce-start(p), replica_groups={}, to_apply=add");
  ASSERT_TRUE(start.ok()) << start.status().message();

  // Gathers along the major dimension concatenate whole buffers; along another they do not.
  auto ag = PlanOf("  p = f32[4,6] parameter(0)\n"
                   "  ROOT g = f32[16,6] all-gather(p), replica_groups={}, dimensions={0}");
  ASSERT_TRUE(ag.ok()) << ag.status().message();
  EXPECT_EQ(ag->counts, (std::vector<int64_t>{96}));  // bytes
  EXPECT_THAT(PlanOf("  p = f32[4,6] parameter(0)\n"
                     "  ROOT g = f32[4,24] all-gather(p), replica_groups={}, dimensions={1}").status().message(),
              HasSubstr("not the major one"));
  // ... unless the layout makes that dimension the major one, or those above it have one element.
  EXPECT_TRUE(PlanOf("  p = f32[4,6]{0,1} parameter(0)\n"
                     "  ROOT g = f32[4,24]{0,1} all-gather(p), replica_groups={}, dimensions={1}").ok());
  EXPECT_TRUE(PlanOf("  p = f32[1,6] parameter(0)\n"
                     "  ROOT g = f32[1,24] all-gather(p), replica_groups={}, dimensions={1}").ok());

  auto rs = PlanOf("  p = f32[16,6] parameter(0)\n"
                   "  ROOT s = f32[4,6] reduce-scatter(p), replica_groups={}, dimensions={0}, to_apply=add");
  ASSERT_TRUE(rs.ok()) << rs.status().message();
  EXPECT_EQ(rs->kind, NcclPlan::Kind::kReduceScatter);
  EXPECT_EQ(rs->counts, (std::vector<int64_t>{96}));  // elements; each rank receives 96 / members
  EXPECT_FALSE(PlanOf("  p = f32[4,24] parameter(0)\n"
                      "  ROOT s = f32[4,6] reduce-scatter(p), replica_groups={}, dimensions={1}, to_apply=add").ok());

  auto a2a = PlanOf("  p = f32[8,6] parameter(0)\n"
                    "  ROOT a = f32[8,6] all-to-all(p), replica_groups={}, dimensions={0}");
  ASSERT_TRUE(a2a.ok()) << a2a.status().message();
  EXPECT_EQ(a2a->kind, NcclPlan::Kind::kAllToAll);
  EXPECT_FALSE(PlanOf("  p = f32[8,6] parameter(0)\n"
                      "  ROOT a = f32[8,6] all-to-all(p), replica_groups={}, dimensions={1}").ok());
  auto cp = PlanOf("  p = s16[5] parameter(0)\n"
                   "  ROOT c = s16[5] collective-permute(p), source_target_pairs={{0,1},{1,0}}");
  ASSERT_TRUE(cp.ok()) << cp.status().message();  // bytes move whatever their type
  EXPECT_EQ(cp->counts, (std::vector<int64_t>{10}));
  EXPECT_TRUE(PlanOf("  p = c64[5] parameter(0)\n"
                     "  ROOT b = c64[5] collective-broadcast(p), replica_groups={}").ok());
  // The -done forms and the other -start forms go through the host.
  EXPECT_FALSE(PlanOf("  p = f32[4] parameter(0)\n"
                      "  ROOT g = (f32[4], f32[16]) all-gather-start(p), replica_groups={}, dimensions={0}").ok());
}

TEST(GpuCollectiveModelTest, RingTimesAtTheNvlinkBusBandwidth) {
  auto target = GpuTargetByName("h200");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->nvlink_gbps, 450);
  // 64 MB all-reduce on 8 GPUs: 2*7/8 of it through each GPU's links at 360 GB/s, 14 steps.
  const int64_t mb64 = 64 << 20;
  CollectivePrediction ar = PredictCollectiveTime(*target, HloOpcode::kAllReduce, mb64, mb64, 8);
  EXPECT_EQ(ar.steps, 14);
  EXPECT_DOUBLE_EQ(ar.bus_bytes, 2.0 * 7 / 8 * mb64);
  EXPECT_NEAR(ar.ns, 14 * 1500 + 2.0 * 7 / 8 * mb64 / 360, 1e-6);
  // The -start form costs what its collective does.
  EXPECT_DOUBLE_EQ(PredictCollectiveTime(*target, HloOpcode::kAllReduceStart, mb64, mb64, 8).ns, ar.ns);
  // An all-gather moves (n-1)/n of its result, a reduce-scatter of its operand.
  EXPECT_DOUBLE_EQ(PredictCollectiveTime(*target, HloOpcode::kAllGather, 1000, 4000, 4).bus_bytes, 3000);
  EXPECT_DOUBLE_EQ(PredictCollectiveTime(*target, HloOpcode::kReduceScatter, 4000, 1000, 4).bus_bytes, 3000);
  EXPECT_EQ(PredictCollectiveTime(*target, HloOpcode::kCollectivePermute, 4000, 4000, 4).steps, 1);
  // A group of one and a -done take nothing.
  EXPECT_EQ(PredictCollectiveTime(*target, HloOpcode::kAllReduce, mb64, mb64, 1).ns, 0);
  EXPECT_EQ(PredictCollectiveTime(*target, HloOpcode::kAllReduceDone, mb64, mb64, 8).ns, 0);
}

// Where NCCL and a GPU are present: a communicator of one GPU is made; one naming the GPU twice
// is refused, which is why --backend=gpu needs a GPU per device.
TEST(NcclLibraryTest, CommunicatorsOnARealGpu) {
  auto gpus = CountCudaDevices();
  if (!gpus.ok() || *gpus < 1) GTEST_SKIP() << "no GPU";
  auto nccl = LoadNccl();
  if (!nccl.ok()) GTEST_SKIP() << nccl.status().message();
  std::printf("NCCL %d from %s, %d GPU(s)\n", (*nccl)->version, (*nccl)->path.c_str(), *gpus);
  NcclComm one = nullptr;
  const int device0 = 0;
  ASSERT_TRUE(CheckNccl(**nccl, (*nccl)->ncclCommInitAll(&one, 1, &device0), "ncclCommInitAll").ok());
  (*nccl)->ncclCommDestroy(one);
  if (*gpus == 1) {
    NcclComm two[2] = {nullptr, nullptr};
    const int twice[2] = {0, 0};
    Status duplicate = CheckNccl(**nccl, (*nccl)->ncclCommInitAll(two, 2, twice), "ncclCommInitAll");
    std::printf("two ranks on GPU 0: %s\n", duplicate.ok() ? "allowed" : duplicate.message().c_str());
    EXPECT_FALSE(duplicate.ok()) << "NCCL put two ranks on one GPU: --backend=gpu could run R x P on one";
    for (NcclComm c : two) {
      if (c != nullptr) (*nccl)->ncclCommDestroy(c);
    }
  }
}

}  // namespace
}  // namespace xlens::runtime
