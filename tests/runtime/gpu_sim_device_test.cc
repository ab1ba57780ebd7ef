// The GPU simulator's semantics, on hand-written NVVM kernels: each kernel gives a wrong answer
// if the simulator did not honour what it tests (a barrier, a shuffle, shared memory per block,
// atomicity), and the expected values are computed here from CUDA's definitions. The same
// kernels, compiled to PTX, run on a real GPU where a CUDA driver is present.
#include "compiler/runtime/gpu_sim_device.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>

#include "compiler/codegen/gpu/nvptx_backend.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

constexpr const char* kDeclarations = R"(
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare void @llvm.nvvm.barrier0()
declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.shfl.sync.up.i32(i32, i32, i32, i32)
declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)
declare float @llvm.nvvm.shfl.sync.down.f32(i32, float, i32, i32)
declare i32 @llvm.nvvm.vote.ballot.sync(i32, i1)
declare i32 @llvm.nvvm.redux.sync.add(i32, i32)
declare i64 @llvm.nvvm.read.ptx.sreg.clock64()
declare void @llvm.trap()
declare float @__nv_sqrtf(float)
declare i32 @__nv_isnanf(float)
declare float @__nv_powif(float, i32)
declare float @__nv_fast_expf(float)
declare float @__nv_saturatef(float)
)";

// A module of `body` with `kernels` marked as kernels.
std::string Module(const std::string& body, const std::vector<std::string>& kernels) {
  std::string text = std::string(kDeclarations) + body + "\n!nvvm.annotations = !{";
  for (size_t i = 0; i < kernels.size(); ++i) text += (i ? ", !" : "!") + std::to_string(i);
  text += "}\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    text += "!" + std::to_string(i) + " = !{ptr @" + kernels[i] + ", !\"kernel\", i32 1}\n";
  }
  return text;
}

// Loads, copies and downloads on a GPU device: the simulator, or (GpuSemanticsTest on "cuda")
// a real GPU through the driver, the same NVVM compiled to PTX.
class GpuDeviceFixture {
 protected:
  GpuModuleHandle Load(const std::string& text) {
    GpuModuleImage image;
    image.llvm_ir = text;
    if (device_->needs_ptx()) {
      llvm::LLVMContext context;
      llvm::SMDiagnostic diagnostic;
      std::unique_ptr<llvm::Module> module = llvm::parseIR(llvm::MemoryBufferRef(text, "kernels"), diagnostic, context);
      EXPECT_NE(module, nullptr) << diagnostic.getMessage().str();
      if (module == nullptr) return -1;
      codegen::NvptxOptions options;
      options.gpu_arch = device_->arch();
      auto ptx = codegen::CompileToPtx(*module, options);
      EXPECT_TRUE(ptx.ok()) << ptx.status().message();
      if (!ptx.ok()) return -1;
      image.ptx = *ptx;
    }
    auto handle = device_->LoadModule(image);
    EXPECT_TRUE(handle.ok()) << handle.status().message();
    return handle.ok() ? *handle : -1;
  }
  template <typename T>
  DevicePointer Upload(const std::vector<T>& values) {
    DevicePointer p = device_->Allocate(values.size() * sizeof(T)).value();
    EXPECT_TRUE(device_->CopyToDevice(p, values.data(), values.size() * sizeof(T)).ok());
    return p;
  }
  template <typename T>
  std::vector<T> Download(DevicePointer p, size_t n) {
    std::vector<T> values(n);
    EXPECT_TRUE(device_->CopyFromDevice(values.data(), p, n * sizeof(T)).ok());
    return values;
  }

  std::unique_ptr<GpuDevice> device_;
};

// What the simulator alone does: its race check, observer, statistics and refusals.
class GpuSimTest : public ::testing::Test, public GpuDeviceFixture {
 protected:
  void SetUp() override {
    auto opened = OpenSimulatedGpuDevice(options_);
    if (!opened.ok()) GTEST_SKIP() << opened.status().message();
    sim_ = opened->get();
    device_ = std::move(*opened);
  }
  GpuSimOptions options_;
  GpuSimDevice* sim_ = nullptr;
};

// GPU semantics that hold on the simulator and on a real GPU alike: the same kernels and checks
// run on both ("cuda" skips without a driver or without libdevice).
class GpuSemanticsTest : public ::testing::TestWithParam<std::string>, public GpuDeviceFixture {
 protected:
  void SetUp() override {
    if (GetParam() == "sim") {
      auto opened = OpenSimulatedGpuDevice();
      if (!opened.ok()) GTEST_SKIP() << opened.status().message();
      device_ = std::move(*opened);
    } else {
      auto opened = OpenCudaDevice();
      if (!opened.ok()) GTEST_SKIP() << "no GPU: " << opened.status().message();
      device_ = std::move(*opened);
    }
  }
};

// Each block reverses its slice through shared memory: without the barrier a thread would read
// a slot its partner has not written yet.
constexpr const char* kReverse = R"(
@buf = internal addrspace(3) global [256 x float] undef, align 4
define void @reverse(ptr %in, ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %bid, %ntid
  %gi = add i32 %base, %tid
  %gi64 = zext i32 %gi to i64
  %src = getelementptr float, ptr %in, i64 %gi64
  %v = load float, ptr %src
  %tid64 = zext i32 %tid to i64
  %slot = getelementptr [256 x float], ptr addrspace(3) @buf, i64 0, i64 %tid64
  store float %v, ptr addrspace(3) %slot
  call void @llvm.nvvm.barrier0()
  %last = sub i32 %ntid, 1
  %r = sub i32 %last, %tid
  %r64 = zext i32 %r to i64
  %rslot = getelementptr [256 x float], ptr addrspace(3) @buf, i64 0, i64 %r64
  %w = load float, ptr addrspace(3) %rslot
  %dst = getelementptr float, ptr %out, i64 %gi64
  store float %w, ptr %dst
  ret void
}
)";

TEST_P(GpuSemanticsTest, BarrierOrdersSharedMemoryWritesBeforeReads) {
  const GpuModuleHandle m = Load(Module(kReverse, {"reverse"}));
  const int blocks = 8, threads = 256;
  std::vector<float> input(blocks * threads);
  std::iota(input.begin(), input.end(), 1.0f);
  DevicePointer in = Upload(input), out = Upload(std::vector<float>(input.size(), -1));
  ASSERT_TRUE(device_->Launch(m, "reverse", {blocks, threads}, {in, out}).ok());
  std::vector<float> result = Download<float>(out, input.size());
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(result[b * threads + t], input[b * threads + threads - 1 - t]) << "block " << b << " thread " << t;
    }
  }
}

// Thread 0 of each block adds its block number + 1 to a shared counter that the simulator starts
// at zero (a GPU leaves it undefined); a block that saw another block's shared memory would read a
// larger sum.
constexpr const char* kPerBlock = R"(
@counter = internal addrspace(3) global i32 undef, align 4
define void @per_block(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %add, label %wait
add:
  %old = load i32, ptr addrspace(3) @counter
  %b1 = add i32 %bid, 1
  %new = add i32 %old, %b1
  store i32 %new, ptr addrspace(3) @counter
  br label %wait
wait:
  call void @llvm.nvvm.barrier0()
  %v = load i32, ptr addrspace(3) @counter
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %bid, %ntid
  %gi = add i32 %base, %tid
  %gi64 = zext i32 %gi to i64
  %dst = getelementptr i32, ptr %out, i64 %gi64
  store i32 %v, ptr %dst
  ret void
}
)";

TEST_F(GpuSimTest, SharedMemoryIsSeparatePerBlockAndStartsZeroed) {
  const GpuModuleHandle m = Load(Module(kPerBlock, {"per_block"}));
  const int blocks = 64, threads = 32;
  DevicePointer out = Upload(std::vector<int32_t>(blocks * threads, -1));
  ASSERT_TRUE(device_->Launch(m, "per_block", {blocks, threads}, {out}).ok());
  std::vector<int32_t> result = Download<int32_t>(out, blocks * threads);
  for (int i = 0; i < blocks * threads; ++i) ASSERT_EQ(result[i], i / threads + 1) << i;
}

// Shuffles of every mode with CUDA's width-32 encodings of c, a vote and a warp reduction, and a
// float tree reduction over shfl.down whose lane 0 holds the warp's sum only if every step
// exchanged values between lanes.
constexpr const char* kShuffles = R"(
define void @shuffles(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %v3 = mul i32 %tid, 3
  %v = add i32 %v3, 1
  %x = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %v, i32 5, i32 31)
  %d = call i32 @llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %v, i32 3, i32 31)
  %u = call i32 @llvm.nvvm.shfl.sync.up.i32(i32 -1, i32 %v, i32 2, i32 0)
  %i = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %v, i32 7, i32 31)
  %rem = urem i32 %tid, 3
  %p = icmp eq i32 %rem, 0
  %ballot = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %p)
  %sum = call i32 @llvm.nvvm.redux.sync.add(i32 %v, i32 -1)
  %f0 = uitofp i32 %v to float
  %s16 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %f0, i32 16, i32 31)
  %f1 = fadd float %f0, %s16
  %s8 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %f1, i32 8, i32 31)
  %f2 = fadd float %f1, %s8
  %s4 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %f2, i32 4, i32 31)
  %f3 = fadd float %f2, %s4
  %s2 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %f3, i32 2, i32 31)
  %f4 = fadd float %f3, %s2
  %s1 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %f4, i32 1, i32 31)
  %f5 = fadd float %f4, %s1
  %tree = fptoui float %f5 to i32
  %row = mul i32 %tid, 7
  %row64 = zext i32 %row to i64
  %o0 = getelementptr i32, ptr %out, i64 %row64
  store i32 %x, ptr %o0
  %o1 = getelementptr i32, ptr %o0, i64 1
  store i32 %d, ptr %o1
  %o2 = getelementptr i32, ptr %o0, i64 2
  store i32 %u, ptr %o2
  %o3 = getelementptr i32, ptr %o0, i64 3
  store i32 %i, ptr %o3
  %o4 = getelementptr i32, ptr %o0, i64 4
  store i32 %ballot, ptr %o4
  %o5 = getelementptr i32, ptr %o0, i64 5
  store i32 %sum, ptr %o5
  %o6 = getelementptr i32, ptr %o0, i64 6
  store i32 %tree, ptr %o6
  ret void
}
)";

TEST_P(GpuSemanticsTest, ShufflesVotesAndWarpReductionsFollowCuda) {
  const GpuModuleHandle m = Load(Module(kShuffles, {"shuffles"}));
  const int threads = 64;
  DevicePointer out = Upload(std::vector<int32_t>(threads * 7, -1));
  ASSERT_TRUE(device_->Launch(m, "shuffles", {1, threads}, {out}).ok());
  std::vector<int32_t> r = Download<int32_t>(out, threads * 7);
  auto v = [](int t) { return 3 * t + 1; };
  for (int t = 0; t < threads; ++t) {
    const int warp = t / 32 * 32, lane = t % 32;
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_EQ(r[t * 7 + 0], v(warp + (lane ^ 5)));
    EXPECT_EQ(r[t * 7 + 1], lane + 3 <= 31 ? v(t + 3) : v(t));
    EXPECT_EQ(r[t * 7 + 2], lane - 2 >= 0 ? v(t - 2) : v(t));
    EXPECT_EQ(r[t * 7 + 3], v(warp + 7));
    uint32_t ballot = 0, sum = 0;
    for (int l = 0; l < 32; ++l) {
      if ((warp + l) % 3 == 0) ballot |= 1u << l;
      sum += v(warp + l);
    }
    EXPECT_EQ(static_cast<uint32_t>(r[t * 7 + 4]), ballot);
    EXPECT_EQ(static_cast<uint32_t>(r[t * 7 + 5]), sum);
    if (lane == 0) EXPECT_EQ(static_cast<uint32_t>(r[t * 7 + 6]), sum);
  }
}

// Every thread of every block adds 1 to a global counter, and adds to a shared counter that
// thread 0 stores after a barrier: lost updates would show in either.
constexpr const char* kAtomics = R"(
@count = internal addrspace(3) global i32 undef, align 4
define void @atomics(ptr %global, ptr %per_block, ptr %fsum) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %leader = icmp eq i32 %tid, 0
  br i1 %leader, label %init, label %go
init:
  store i32 0, ptr addrspace(3) @count
  br label %go
go:
  call void @llvm.nvvm.barrier0()
  %g = atomicrmw add ptr %global, i32 1 monotonic
  %s = atomicrmw add ptr addrspace(3) @count, i32 1 monotonic
  %f = atomicrmw fadd ptr %fsum, float 1.0 monotonic
  call void @llvm.nvvm.barrier0()
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %write, label %done
write:
  %n = load i32, ptr addrspace(3) @count
  %b64 = zext i32 %bid to i64
  %dst = getelementptr i32, ptr %per_block, i64 %b64
  store i32 %n, ptr %dst
  br label %done
done:
  ret void
}
)";

TEST_P(GpuSemanticsTest, AtomicsAreAtomicAcrossThreadsAndBlocks) {
  const GpuModuleHandle m = Load(Module(kAtomics, {"atomics"}));
  const int blocks = 128, threads = 256;
  DevicePointer global = Upload(std::vector<int32_t>{0});
  DevicePointer per_block = Upload(std::vector<int32_t>(blocks, 0));
  DevicePointer fsum = Upload(std::vector<float>{0});
  ASSERT_TRUE(device_->Launch(m, "atomics", {blocks, threads}, {global, per_block, fsum}).ok());
  EXPECT_EQ(Download<int32_t>(global, 1)[0], blocks * threads);
  EXPECT_EQ(Download<float>(fsum, 1)[0], static_cast<float>(blocks * threads));
  for (int32_t n : Download<int32_t>(per_block, blocks)) ASSERT_EQ(n, threads);
}

TEST_F(GpuSimTest, AnUnmodelledIntrinsicIsRefusedByName) {
  auto handle = device_->LoadModule({"", Module(R"(
define void @clock(ptr %out) {
  %c = call i64 @llvm.nvvm.read.ptx.sreg.clock64()
  store i64 %c, ptr %out
  ret void
}
)", {"clock"})});
  ASSERT_FALSE(handle.ok());
  EXPECT_THAT(handle.status().message(), HasSubstr("does not model llvm.nvvm.read.ptx.sreg.clock64"));
}

// All threads write one shared slot, then read it back after a barrier.
constexpr const char* kRacy = R"(
@slot = internal addrspace(3) global i32 undef, align 4
define void @racy(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  store i32 %tid, ptr addrspace(3) @slot
  call void @llvm.nvvm.barrier0()
  %v = load i32, ptr addrspace(3) @slot
  %t64 = zext i32 %tid to i64
  %dst = getelementptr i32, ptr %out, i64 %t64
  store i32 %v, ptr %dst
  ret void
}
)";

TEST_F(GpuSimTest, TheRaceCheckReportsARacyKernelAndPassesACorrectOne) {
  options_.race_check = true;
  auto opened = OpenSimulatedGpuDevice(options_);
  ASSERT_TRUE(opened.ok());
  sim_ = opened->get();
  device_ = std::move(*opened);
  DevicePointer out = Upload(std::vector<int32_t>(64, 0));
  const GpuModuleHandle racy = Load(Module(kRacy, {"racy"}));
  Status status = device_->Launch(racy, "racy", {2, 64}, {out});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("data race in kernel racy, block 0: thread 0 writes shared memory offset 0 "
                                          "and thread 1 writes it"));
  EXPECT_THAT(status.message(), HasSubstr("`store i32 %tid, ptr addrspace(3) %slot"));
  const GpuModuleHandle ok = Load(Module(kReverse, {"reverse"}));
  std::vector<float> input(256, 1.0f);
  DevicePointer in = Upload(input), result = Upload(input);
  EXPECT_TRUE(device_->Launch(ok, "reverse", {1, 256}, {in, result}).ok());
}

TEST_F(GpuSimTest, WithoutTheRaceCheckARacyKernelRuns) {
  DevicePointer out = Upload(std::vector<int32_t>(64, 0));
  const GpuModuleHandle racy = Load(Module(kRacy, {"racy"}));
  EXPECT_TRUE(device_->Launch(racy, "racy", {1, 64}, {out}).ok());
}

// Lanes 0..15 wait at a barrier; the rest of warp 0 waits for them at a shuffle.
constexpr const char* kDeadlock = R"(
define void @deadlock(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %low = icmp ult i32 %tid, 16
  br i1 %low, label %barrier, label %shuffle
barrier:
  call void @llvm.nvvm.barrier0()
  ret void
shuffle:
  %v = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %tid, i32 1, i32 31)
  store i32 %v, ptr %out
  ret void
}
)";

TEST_F(GpuSimTest, ABlockThatCannotGoOnIsAnErrorNotAHang) {
  const GpuModuleHandle m = Load(Module(kDeadlock, {"deadlock"}));
  DevicePointer out = Upload(std::vector<int32_t>(1, 0));
  Status status = device_->Launch(m, "deadlock", {1, 32}, {out});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cannot go on"));
}

TEST_F(GpuSimTest, ATrapFailsTheLaunch) {
  const GpuModuleHandle m = Load(Module(R"(
define void @trap(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bad = icmp eq i32 %tid, 5
  br i1 %bad, label %t, label %ok
t:
  call void @llvm.trap()
  unreachable
ok:
  ret void
}
)", {"trap"}));
  DevicePointer out = Upload(std::vector<int32_t>(1, 0));
  Status status = device_->Launch(m, "trap", {1, 32}, {out});
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("thread 5 of block 0 trapped"));
}

// An observer sees every global and shared access: thread, address or offset, size, direction.
class Recorder : public GpuSimObserver {
 public:
  void KernelBegin(const GpuKernelLaunchInfo& launch, int workers) override {
    sites = *launch.sites;
    shared_bytes = launch.shared_memory_bytes;
  }
  void BlockBegin(int worker, int64_t block) override { ++blocks; }
  void Access(int worker, int64_t block, const GpuMemoryAccess& access) override { accesses.push_back(access); }
  void Barrier(int worker, int64_t block) override { ++barriers; }
  std::vector<GpuAccessSite> sites;
  std::vector<GpuMemoryAccess> accesses;
  int64_t shared_bytes = 0;
  int blocks = 0, barriers = 0;
};

TEST_F(GpuSimTest, AnObserverSeesEveryGlobalAndSharedAccess) {
  const GpuModuleHandle m = Load(Module(kReverse, {"reverse"}));
  const int blocks = 2, threads = 64;
  std::vector<float> input(blocks * threads, 1.0f);
  DevicePointer in = Upload(input), out = Upload(input);
  Recorder recorder;
  sim_->SetObserver(&recorder);
  ASSERT_TRUE(device_->Launch(m, "reverse", {blocks, threads}, {in, out}).ok());
  sim_->SetObserver(nullptr);
  EXPECT_EQ(recorder.blocks, blocks);
  EXPECT_EQ(recorder.barriers, blocks);
  EXPECT_EQ(recorder.shared_bytes, 1024);
  ASSERT_EQ(recorder.sites.size(), 4u);
  ASSERT_EQ(recorder.accesses.size(), 4u * blocks * threads);
  int global_loads = 0, shared_stores = 0, shared_loads = 0, global_stores = 0;
  for (const GpuMemoryAccess& a : recorder.accesses) {
    EXPECT_EQ(a.bytes, 4);
    const GpuAccessSite& site = recorder.sites[a.site];
    EXPECT_EQ(site.store, a.store);
    if (a.space == GpuMemorySpace::kShared) {
      EXPECT_LT(a.address, 1024u);
      if (a.store) {
        EXPECT_EQ(a.address, 4u * a.thread);
        ++shared_stores;
      } else {
        EXPECT_EQ(a.address, 4u * (threads - 1 - a.thread));
        ++shared_loads;
      }
    } else {
      const DevicePointer base = a.store ? out : in;
      EXPECT_GE(a.address, base);
      EXPECT_EQ((a.address - base) / 4 % threads, static_cast<uint64_t>(a.thread));
      (a.store ? global_stores : global_loads)++;
    }
  }
  EXPECT_EQ(global_loads, blocks * threads);
  EXPECT_EQ(global_stores, blocks * threads);
  EXPECT_EQ(shared_loads, blocks * threads);
  EXPECT_EQ(shared_stores, blocks * threads);
}

TEST_F(GpuSimTest, LibdeviceCallsAreHostMathAndAKernelWithoutSyncRunsAsALoop) {
  const GpuModuleHandle m = Load(Module(R"(
define void @root(ptr %in, ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %bid, %ntid
  %gi = add i32 %base, %tid
  %gi64 = zext i32 %gi to i64
  %src = getelementptr float, ptr %in, i64 %gi64
  %v = load float, ptr %src
  %r = call float @__nv_sqrtf(float %v)
  %dst = getelementptr float, ptr %out, i64 %gi64
  store float %r, ptr %dst
  ret void
}
)", {"root"}));
  std::vector<float> input(1000);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i) * 0.37f;
  DevicePointer in = Upload(input), out = Upload(std::vector<float>(1000, 0));
  ASSERT_TRUE(device_->Launch(m, "root", {4, 250}, {in, out}).ok());
  std::vector<float> result = Download<float>(out, 1000);
  for (size_t i = 0; i < input.size(); ++i) ASSERT_EQ(result[i], std::sqrt(input[i])) << i;  // sqrt is exact
  EXPECT_EQ(sim_->stats().fiber_launches, 0);
  EXPECT_EQ(sim_->stats().threads, 1000);
}

TEST_F(GpuSimTest, LibdeviceClassificationPowersAndFastMathMapToTheirHostMeaning) {
  const GpuModuleHandle m = Load(Module(R"(
define void @math(ptr %in, ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %t64 = zext i32 %tid to i64
  %src = getelementptr float, ptr %in, i64 %t64
  %v = load float, ptr %src
  %n = call i32 @__nv_isnanf(float %v)
  %nf = sitofp i32 %n to float
  %p = call float @__nv_powif(float %v, i32 3)
  %e = call float @__nv_fast_expf(float %v)
  %s = call float @__nv_saturatef(float %v)
  %row = mul i64 %t64, 4
  %o0 = getelementptr float, ptr %out, i64 %row
  store float %nf, ptr %o0
  %o1 = getelementptr float, ptr %o0, i64 1
  store float %p, ptr %o1
  %o2 = getelementptr float, ptr %o0, i64 2
  store float %e, ptr %o2
  %o3 = getelementptr float, ptr %o0, i64 3
  store float %s, ptr %o3
  ret void
}
)", {"math"}));
  const std::vector<float> input = {std::nanf(""), 2.0f, -1.0f, 0.5f, INFINITY};
  DevicePointer in = Upload(input), out = Upload(std::vector<float>(20, -7));
  ASSERT_TRUE(device_->Launch(m, "math", {1, 5}, {in, out}).ok());
  std::vector<float> r = Download<float>(out, 20);
  const float isnan[] = {1, 0, 0, 0, 0}, saturate[] = {0, 1, 0, 0.5f, 1};
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r[i * 4], isnan[i]);
    if (i == 0) {
      EXPECT_TRUE(std::isnan(r[1]));
    } else {
      EXPECT_EQ(r[i * 4 + 1], input[i] * input[i] * input[i]);
    }
    if (i > 0) EXPECT_FLOAT_EQ(r[i * 4 + 2], std::exp(input[i]));
    EXPECT_EQ(r[i * 4 + 3], saturate[i]);
  }
}

TEST_F(GpuSimTest, BadLaunchesAreErrors) {
  const GpuModuleHandle m = Load(Module(kReverse, {"reverse"}));
  DevicePointer p = Upload(std::vector<float>(16, 0));
  EXPECT_THAT(device_->Launch(m, "reverse", {1, 2048}, {p, p}).message(), HasSubstr("threads per block"));
  EXPECT_THAT(device_->Launch(m, "reverse", {1, 32}, {p}).message(), HasSubstr("takes 2 arguments"));
  EXPECT_THAT(device_->Launch(m, "missing", {1, 32}, {p, p}).message(), HasSubstr("not in its executable's module"));
  EXPECT_THAT(device_->Launch(7, "reverse", {1, 32}, {p, p}).message(), HasSubstr("never loaded"));
  EXPECT_FALSE(device_->CopyToDevice(p + 60, &p, 8).ok());
  EXPECT_FALSE(device_->LoadModule({"ptx only", ""}).ok());
  auto bad = device_->LoadModule({"", "define void @f( {"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("does not parse"));
}

TEST_F(GpuSimTest, KernelsWithBarriersRunAsFibers) {
  const GpuModuleHandle m = Load(Module(kReverse, {"reverse"}));
  std::vector<float> input(512, 1.0f);
  DevicePointer in = Upload(input), out = Upload(input);
  ASSERT_TRUE(device_->Launch(m, "reverse", {2, 256}, {in, out}).ok());
  EXPECT_EQ(sim_->stats().fiber_launches, 1);
  EXPECT_EQ(sim_->stats().threads, 512);
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuSemanticsTest, ::testing::Values("sim", "cuda"));

}  // namespace
}  // namespace xlens::runtime
