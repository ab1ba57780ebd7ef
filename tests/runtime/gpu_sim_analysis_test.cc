// The GPU simulator's analysis end to end (compiler/runtime/gpu_sim_analysis.h): each launch of a
// module of several shared-memory kernels is charged its own shared memory, as ptxas reports it,
// not the simulator's block buffer (which lays out every kernel's shared variables side by side).
#include <random>

#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_kernel_resources.h"
#include "compiler/runtime/gpu_sim_analysis.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens {
namespace {

TEST(GpuSimAnalysisTest, EachLaunchIsChargedItsOwnSharedMemory) {
  if (runtime::FindPtxas().empty()) GTEST_SKIP() << "ptxas not found (the CUDA toolkit is not installed)";
  runtime::GpuSimOptions sim_options;
  sim_options.want_ptx = true;
  auto device = runtime::OpenSimulatedGpuDevice(sim_options);
  if (!device.ok()) GTEST_SKIP() << device.status().message();
  // A column reduction, a tiled GEMM and a tiled transpose: kernels with shared tiles of their own.
  auto module = ParseHloModule(R"(HloModule three
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main {
  x = f32[256,128] parameter(0)
  w = f32[128,64] parameter(1)
  y = f32[96,160] parameter(2)
  z = f32[] constant(0)
  r = f32[128] reduce(x, z), dimensions={0}, to_apply=add
  d = f32[256,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[160,96] transpose(y), dimensions={1,0}
  e = f32[160,96] exponential(t)
  ROOT out = (f32[128], f32[256,64], f32[160,96]) tuple(r, d, e)
}
)");
  ASSERT_TRUE(module.ok()) << module.status().message();
  std::mt19937_64 rng(1);
  std::vector<Literal> args;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    args.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  auto exe = runtime::GpuExecutable::Create(std::move(*module), {}, **device);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  ASSERT_TRUE((*exe)->Execute(args).ok());
  auto analysis = runtime::AnalyseGpuSimRun(**exe, **device, runtime::GpuTargetByName("h100").value(), 4);
  ASSERT_TRUE(analysis.ok()) << analysis.status().message();
  auto assembled = runtime::KernelResourcesOf((*exe)->ptx(), "sm_90");
  ASSERT_TRUE(assembled.ok()) << assembled.status().message();
  int shared_kernels = 0;
  for (const runtime::GpuLaunchAnalysis& launch : analysis->launches) {
    SCOPED_TRACE(launch.kernel);
    const runtime::KernelResources& own = assembled->kernels.at(launch.kernel);
    EXPECT_EQ(launch.resources.shared_bytes, own.shared_bytes);
    if (own.shared_bytes > 0) ++shared_kernels;
  }
  EXPECT_GE(shared_kernels, 3);  // else the module no longer tests what it is for
}

}  // namespace
}  // namespace xlens
