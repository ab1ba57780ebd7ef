// `xlens run` and `xlens compile` as a user runs them.
#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr const char* kChain = R"(HloModule chain
ENTRY main {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  m = f32[4096] multiply(x, y), metadata={op_name="mul"}
  a = f32[4096] add(m, x), metadata={op_name="add"}
  ROOT t = f32[4096] tanh(a), metadata={op_name="tanh"}
}
)";

class RunCliTest : public CliTest {};

TEST_F(RunCliTest, RunsComparesWithTheEvaluatorAndTimes) {
  const std::string file = Write("chain.hlo", kChain);
  RunResult r = RunXlens("run " + file + " --inputs random --reference --iterations 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // tanh is vectorized through glibc's vector math library: a few ulps from the evaluator's.
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "reference: largest absolute error [0-9.e-]+, largest relative error "
                            "[0-9.e-]+ \\(tolerance 0.001\\): match"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "compile [0-9.]+ ms; run median [0-9.]+ ms over 5 iterations \\(best [0-9.]+ ms\\)"));
  // The best of the runs is never above their median.
  std::smatch times;
  ASSERT_TRUE(std::regex_search(r.output, times, std::regex("run median ([0-9.]+) ms .*best ([0-9.]+) ms")));
  EXPECT_LE(std::stod(times[2]), std::stod(times[1])) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 kernels"));
}

// An f16 output is held to f16's own tolerance: a planted + 1 on values near 300 (0.33%) is within
// its 1e-2, not within the default 1e-3 of f32.
TEST_F(RunCliTest, HalfOutputsAreComparedWithinTheirOwnTolerance) {
  const std::string file = Write("half.hlo", R"(HloModule half
ENTRY main {
  p = f16[256] parameter(0)
  c = f16[256] broadcast(f16[] constant(300)), dimensions={}
  ROOT a = f16[256] add(p, c)
}
)");
  RunResult r = RunXlens("run " + file + " --reference --xla_test_miscompile_kernel=fusion");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("largest absolute error [1-9][0-9.e+-]*, .*"
                                                 "\\(tolerance 0.001, f16 0.01\\): match")) << r.output;
}

// The multi-device runs print the verdict run prints: non-finite mismatches counted (log(exp(-95))
// is -inf once exp(-95), a subnormal, is flushed to 0), widened f16 tolerances named.
TEST_F(RunCliTest, MultiDeviceVerdictCountsNonFiniteMismatchesAndNamesWidenedTolerances) {
  const std::string values = Write("values.hlo", R"(HloModule values
ENTRY main {
  ROOT c = f32[4] constant({-95, -95, -95, 1})
}
)");
  ASSERT_EQ(RunXlens("eval " + values + " --outputs " + (dir_ / "in").string()).exit_code, 0);
  std::filesystem::rename(dir_ / "in/out0.npy", dir_ / "in/arg0.npy");
  const std::string logexp = Write("logexp.hlo", R"(HloModule logexp
ENTRY main {
  x = f32[4] parameter(0)
  e = f32[4] exponential(x)
  ROOT l = f32[4] log(e)
}
)");
  RunResult r = RunXlens("run " + logexp + " --reference --num_replicas 2 --inputs " +
                         (dir_ / "in").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(", 6 non-finite mismatch(es) over 2 devices (tolerance 0.001): "
                                  "MISMATCH")) << r.output;
  const std::string half = Write("h.hlo", R"(HloModule h
ENTRY main {
  p = f16[4] parameter(0)
  c = f16[4] broadcast(f16[] constant(300)), dimensions={}
  ROOT a = f16[4] add(p, c)
}
)");
  RunResult h = RunXlens("run " + half + " --reference --num_replicas 2 "
                         "--xla_test_miscompile_kernel=fusion");
  EXPECT_EQ(h.exit_code, 0) << h.output;
  EXPECT_THAT(h.output, HasSubstr("over 2 devices (tolerance 0.001, f16 0.01): match")) << h.output;
}

TEST_F(RunCliTest, WritesOutputsReadsInputsAndDumpsCodegenFiles) {
  const std::string file = Write("chain.hlo", kChain);
  const std::string dump = (dir_ / "dump").string();
  RunResult eval = RunXlens("eval " + file + " --outputs " + (dir_ / "in").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  // The evaluator's outputs are f32[4096]: feed out0 as both inputs.
  std::filesystem::copy_file(dir_ / "in/out0.npy", dir_ / "in/arg0.npy");
  std::filesystem::copy_file(dir_ / "in/out0.npy", dir_ / "in/arg1.npy");
  RunResult r = RunXlens("run " + file + " --inputs " + (dir_ / "in").string() + " --outputs " +
                         (dir_ / "out").string() + " --reference --xla_dump_to=" + dump);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out/out0.npy"));
  for (const char* suffix : {"ir-no-opt.ll", "ir-with-opt.ll", "thunk_sequence.txt",
                             "cpu_after_optimizations.txt"}) {
    EXPECT_TRUE(std::filesystem::exists(dump + "/module_0001.chain." + suffix)) << suffix;
  }
  const std::string manifest = testing::ReadTestFile(dump + "/manifest.json");
  EXPECT_THAT(manifest, HasSubstr("\"kernels\""));
  EXPECT_THAT(manifest, HasSubstr("\"fusion_kind\": \"kLoop\""));
  EXPECT_THAT(manifest, HasSubstr("\"mul\""));
  const std::string ir = testing::ReadTestFile(dump + "/module_0001.chain.ir-with-opt.ll");
  EXPECT_THAT(ir, HasSubstr("define void @fusion"));
  EXPECT_THAT(manifest, HasSubstr("\"launch\": \"1 phase: 1 tasks"));
}

// A kernel a library call runs on each of its parts (the convolution's ReLU beside its
// pre-activation) is timed within the call: the report counts it apart from the kernels with
// thunks of their own. Where the call does not run in parts (one thread, or no oneDNN) the
// kernel is one of the module's own.
TEST_F(RunCliTest, KernelsRunByALibraryCallAreCountedApart) {
  const std::string file = Write("conv_relu.hlo", R"(HloModule conv_relu
ENTRY e {
  x = f32[8,16,16,32] parameter(0)
  k = f32[3,3,32,32] parameter(1)
  c = f32[8,16,16,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[8,16,16,32] broadcast(zero), dimensions={}
  r = f32[8,16,16,32] maximum(c, zeros)
  ROOT t = (f32[8,16,16,32], f32[8,16,16,32]) tuple(c, r)
}
)");
  RunResult r = RunXlens("run " + file + " --inputs random --iterations 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (r.output.find("on each part's images") != std::string::npos) {
    EXPECT_THAT(r.output, HasSubstr("1 thunks (0 kernels, 1 more run by library calls)"));
  } else {
    EXPECT_THAT(r.output, HasSubstr("(1 kernels)"));
    EXPECT_THAT(r.output, Not(HasSubstr("run by library calls")));
  }
}

TEST_F(RunCliTest, CompileEmitsLlvmIr) {
  const std::string file = Write("chain.hlo", kChain);
  RunResult r = RunXlens("compile " + file + " --emit=llvm");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("define void @fusion(ptr noalias %buffers"));
  RunResult opt = RunXlens("compile " + file + " --emit=llvm-opt -o " + (dir_ / "k.ll").string());
  EXPECT_EQ(opt.exit_code, 0) << opt.output;
  // tanh is an inline polynomial on the CPU (compiler/codegen/fast_math.h), not a libm call.
  const std::string optimized = testing::ReadTestFile((dir_ / "k.ll").string());
  EXPECT_THAT(optimized, HasSubstr("@llvm.fmuladd.f32"));
  EXPECT_THAT(optimized, ::testing::Not(HasSubstr("tanhf")));
}

TEST_F(RunCliTest, PtxIsDumpedWithItsLaunchDimensions) {
  if (!std::filesystem::exists("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")) {
    GTEST_SKIP() << "the CUDA toolkit's libdevice is not installed";
  }
  const std::string file = Write("chain.hlo", kChain);
  const std::string dump = (dir_ / "dump").string();
  RunResult r = RunXlens("compile " + file + " --emit=ptx --gpu_arch=sm_80 -o " +
                         (dir_ / "k.ptx").string() + " --xla_dump_to=" + dump);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(testing::ReadTestFile((dir_ / "k.ptx").string()), HasSubstr(".target sm_80"));
  EXPECT_TRUE(std::filesystem::exists(dump + "/module_0001.chain.ptx"));
  EXPECT_TRUE(std::filesystem::exists(dump + "/module_0001.chain.sm_8.0_gpu_after_optimizations.txt"));
  // f32[4096], four elements (one 128-bit access) per thread: 4 blocks of 256 threads.
  EXPECT_THAT(testing::ReadTestFile(dump + "/manifest.json"), HasSubstr("\"launch\": \"grid 4 block 256\""));
  RunResult bad = RunXlens("compile " + file + " --emit=ptx --gpu_arch=volta");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("expected an NVIDIA architecture"));
}

TEST_F(RunCliTest, UserErrorsAreOneLineAndExitOne) {
  const std::string file = Write("chain.hlo", kChain);
  RunResult gpu = RunXlens("run " + file + " --backend=gpu");
  EXPECT_EQ(gpu.exit_code, 1);
  if (!std::filesystem::exists("/dev/nvidia0")) {
    EXPECT_THAT(gpu.output, HasSubstr("no CUDA driver found"));
  }
  RunResult flag = RunXlens("run " + file + " --xla_disable_hlo_passes=fusoin");
  EXPECT_EQ(flag.exit_code, 1);
  EXPECT_THAT(flag.output, HasSubstr("fusion"));
  RunResult level = RunXlens("run " + file + " --xla_backend_optimization_level=9");
  EXPECT_EQ(level.exit_code, 1);
  const std::string custom = Write("custom.hlo", R"(HloModule c
ENTRY e {
  a = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(a), custom_call_target="my_kernel"
})");
  RunResult refused = RunXlens("run " + custom);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.output, HasSubstr("custom-call \"my_kernel\" cannot run on the CPU backend"));
  RunResult obj = RunXlens("compile " + file + " --emit=obj -o " + (dir_ / "k.o").string());
  EXPECT_EQ(obj.exit_code, 0) << obj.output;
  EXPECT_EQ(testing::ReadTestFile((dir_ / "k.o").string()).substr(0, 4), "\x7f" "ELF");
  RunResult emit = RunXlens("compile " + file + " --emit=wasm");
  EXPECT_EQ(emit.exit_code, 1);
}

}  // namespace
}  // namespace xlens
