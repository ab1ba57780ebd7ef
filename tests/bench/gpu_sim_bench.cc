// The GPU simulator's speed: a 1M-thread elementwise kernel from the GPU backend (threads as a
// plain loop), and a 4096x1024 row reduction through shared memory with barriers (a block of 256
// threads per row, threads as fibers), hand-written as the NVVM a CUDA compiler would produce.
// Each benchmark checks its result once before timing.
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include <benchmark/benchmark.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens::runtime {
namespace {

constexpr const char* kElementwise = R"(HloModule elementwise
ENTRY e {
  x = f32[1048576] parameter(0)
  y = f32[1048576] parameter(1)
  m = f32[1048576] multiply(x, y)
  a = f32[1048576] add(m, x)
  ROOT t = f32[1048576] tanh(a)
})";

void BM_Elementwise1MThreads(benchmark::State& state) {
  auto device = OpenSimulatedGpuDevice();
  if (!device.ok()) return state.SkipWithError(device.status().message().c_str());
  auto module = ParseHloModule(kElementwise);
  std::mt19937_64 rng(1);
  std::vector<Literal> args;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    args.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  auto exe = GpuExecutable::Create(std::move(*module), {}, **device);
  if (!exe.ok()) return state.SkipWithError(exe.status().message().c_str());
  if (!(*exe)->SetArguments(args).ok()) return state.SkipWithError("arguments");
  for (auto _ : state) {
    Status s = (*exe)->Run();
    if (!s.ok()) return state.SkipWithError(s.message().c_str());
  }
  int64_t threads = 0;
  for (const GpuLaunch& l : (*exe)->launches()) threads += l.dims.blocks * l.dims.threads_per_block;
  state.counters["gpu_threads"] = static_cast<double>(threads);
  state.counters["threads/s"] = benchmark::Counter(static_cast<double>(threads), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Elementwise1MThreads)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr const char* kRowSum = R"(
@partial = internal addrspace(3) global [256 x float] undef, align 4
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier0()
define void @row_sum(ptr %in, ptr %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %row = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %row64 = zext i32 %row to i64
  %rowbase = mul i64 %row64, 1024
  %tid64 = zext i32 %tid to i64
  br label %load
load:
  %i = phi i64 [ %tid64, %entry ], [ %inext, %load ]
  %acc = phi float [ 0.0, %entry ], [ %accnext, %load ]
  %idx = add i64 %rowbase, %i
  %p = getelementptr float, ptr %in, i64 %idx
  %v = load float, ptr %p
  %accnext = fadd float %acc, %v
  %inext = add i64 %i, 256
  %more = icmp ult i64 %inext, 1024
  br i1 %more, label %load, label %stored
stored:
  %slot = getelementptr [256 x float], ptr addrspace(3) @partial, i64 0, i64 %tid64
  store float %accnext, ptr addrspace(3) %slot
  call void @llvm.nvvm.barrier0()
  br label %tree
tree:
  %s = phi i32 [ 128, %stored ], [ %snext, %next ]
  %active = icmp ult i32 %tid, %s
  br i1 %active, label %add, label %next
add:
  %other = add i32 %tid, %s
  %o64 = zext i32 %other to i64
  %oslot = getelementptr [256 x float], ptr addrspace(3) @partial, i64 0, i64 %o64
  %ov = load float, ptr addrspace(3) %oslot
  %mine = load float, ptr addrspace(3) %slot
  %sum = fadd float %mine, %ov
  store float %sum, ptr addrspace(3) %slot
  br label %next
next:
  call void @llvm.nvvm.barrier0()
  %snext = lshr i32 %s, 1
  %done = icmp eq i32 %snext, 0
  br i1 %done, label %write, label %tree
write:
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %w, label %exit
w:
  %total = load float, ptr addrspace(3) @partial
  %dst = getelementptr float, ptr %out, i64 %row64
  store float %total, ptr %dst
  br label %exit
exit:
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @row_sum, !"kernel", i32 1}
)";

void BM_RowReduction4096x1024SharedMemory(benchmark::State& state) {
  auto opened = OpenSimulatedGpuDevice();
  if (!opened.ok()) return state.SkipWithError(opened.status().message().c_str());
  GpuDevice& device = **opened;
  auto module = device.LoadModule({"", kRowSum});
  if (!module.ok()) return state.SkipWithError(module.status().message().c_str());
  constexpr int64_t kRows = 4096, kColumns = 1024;
  std::vector<float> input(kRows * kColumns);
  for (int64_t i = 0; i < kRows * kColumns; ++i) input[i] = static_cast<float>(i % 7);
  DevicePointer in = device.Allocate(input.size() * 4).value();
  DevicePointer out = device.Allocate(kRows * 4).value();
  (void)device.CopyToDevice(in, input.data(), input.size() * 4);
  Status first = device.Launch(*module, "row_sum", {kRows, 256}, {in, out});
  if (!first.ok()) return state.SkipWithError(first.message().c_str());
  std::vector<float> sums(kRows);
  (void)device.CopyFromDevice(sums.data(), out, kRows * 4);
  for (int64_t r = 0; r < kRows; ++r) {
    double expected = 0;
    for (int64_t c = 0; c < kColumns; ++c) expected += input[r * kColumns + c];
    if (sums[r] != static_cast<float>(expected)) return state.SkipWithError("wrong row sum");
  }
  for (auto _ : state) {
    Status s = device.Launch(*module, "row_sum", {kRows, 256}, {in, out});
    if (!s.ok()) return state.SkipWithError(s.message().c_str());
  }
  state.counters["gpu_threads"] = static_cast<double>(kRows * 256);
  state.counters["barriers/s"] = benchmark::Counter(static_cast<double>(kRows * 9), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RowReduction4096x1024SharedMemory)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace xlens::runtime
