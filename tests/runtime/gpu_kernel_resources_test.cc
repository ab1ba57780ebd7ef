#include "compiler/runtime/gpu_kernel_resources.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "compiler/support/temporary_directory.h"

namespace xlens::runtime {
namespace {

// A kernel that stages a float through 1 KiB of shared memory, and an empty one.
constexpr const char* kPtx = R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 4 .b8 smem_a[1024];
.visible .entry k1(.param .u64 p0) {
  .reg .b32 %r<5>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<4>;
  .reg .pred %p<2>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [p0];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f1, [%rd2];
  mov.u32 %r2, smem_a;
  st.shared.f32 [%r2], %f1;
  bar.sync 0;
  ld.shared.f32 %f2, [%r2+4];
  st.global.f32 [%rd2], %f2;
  ret;
}
.visible .entry k_2(.param .u64 p0) {
  ret;
}
)";

// What ptxas 12 printed for kPtx with -v -arch=sm_90.
constexpr const char* kReport = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_2' for 'sm_90'
ptxas info    : Function properties for k_2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
ptxas info    : Compile time = 5.369 ms
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    0 bytes stack frame, 8 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 3.752 ms
)";

TEST(GpuKernelResourcesTest, ParsesPtxasReport) {
  auto r = ParsePtxasReport(kReport);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->kernels.size(), 2u);
  EXPECT_EQ(r->kernels["k1"].registers, 8);
  EXPECT_EQ(r->kernels["k1"].shared_bytes, 1024);
  EXPECT_EQ(r->kernels["k1"].spill_bytes, 8);
  EXPECT_EQ(r->kernels["k_2"].registers, 4);
  EXPECT_EQ(r->kernels["k_2"].shared_bytes, 0);
  EXPECT_FALSE(ParsePtxasReport("ptxas fatal   : error: something").ok());
}

TEST(GpuKernelResourcesTest, EstimatesFromDeclarations) {
  ModuleResources r = EstimateFromPtx(kPtx);
  EXPECT_NE(r.source.find("upper bound"), std::string::npos);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels["k1"].registers, 5 + 3 + 2 * 4);  // predicates are not counted
  EXPECT_EQ(r.kernels["k1"].shared_bytes, 1024);
  EXPECT_EQ(r.kernels["k_2"].registers, 0);
  EXPECT_EQ(r.kernels["k_2"].shared_bytes, 0);
  EXPECT_TRUE(EstimateFromPtx("garbage").kernels.empty());
}

TEST(GpuKernelResourcesTest, AssemblesWithPtxasWhereItIsInstalled) {
  if (FindPtxas().empty()) GTEST_SKIP() << "ptxas not found (the CUDA toolkit is not installed)";
  auto r = KernelResourcesOf(kPtx, "sm_90");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->source.find("ptxas -v"), std::string::npos);
  EXPECT_EQ(r->kernels["k1"].shared_bytes, 1024);
  // Allocated registers never exceed the virtual ones declared.
  EXPECT_GT(r->kernels["k1"].registers, 0);
  EXPECT_LE(r->kernels["k1"].registers, 16);
  EXPECT_FALSE(KernelResourcesOf(".version 8.0\n.target sm_90\nthis is not ptx", "sm_90").ok());
  EXPECT_FALSE(KernelResourcesOf(kPtx, "sm_90; rm -rf /").ok());
}

// A stand-in ptxas (found through CUDA_HOME) that records the file it was given and prints a
// -v report: the PTX reaches it whole, from a private directory under $TMPDIR that is gone
// afterwards, and its report is parsed; one that fails is an error with its message.
TEST(GpuKernelResourcesTest, RunsPtxasOnAFileUnderTmpdirAndRemovesIt) {
  // Removed however the test ends, and made under the caller's $TMPDIR like everything else.
  auto scratch = TemporaryDirectory::Create("ptxas-test");
  ASSERT_TRUE(scratch.ok()) << scratch.status().message();
  const std::string root = scratch->path();
  const std::string tmp = root + "/tmp";
  std::filesystem::create_directories(root + "/cuda/bin");
  std::filesystem::create_directories(tmp);
  {
    std::ofstream script(root + "/cuda/bin/ptxas");
    script << "#!/bin/sh\n"
           << "# ptxas -v -arch=ARCH FILE -o /dev/null\n"
           << "echo \"$3\" >" << root << "/given\n"
           << "cp \"$3\" " << root << "/ptx\n"
           << "grep -q 'this is not ptx' \"$3\" && { echo 'ptxas fatal : error: bad input'; exit 255; }\n"
           << "echo \"ptxas info    : Compiling entry function 'k1' for '${2#-arch=}'\"\n"
           << "echo 'ptxas info    : Used 7 registers, used 1 barriers, 1024 bytes smem'\n";
  }
  std::filesystem::permissions(root + "/cuda/bin/ptxas", std::filesystem::perms::owner_all);
  auto set = [](const char* name, const char* value) -> std::string {
    const char* old = std::getenv(name);
    std::string saved = old ? std::string("=") + old : "";
    ::setenv(name, value, 1);
    return saved;
  };
  auto restore = [](const char* name, const std::string& saved) {
    if (saved.empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, saved.c_str() + 1, 1);
    }
  };
  const std::string cuda_home = set("CUDA_HOME", (root + "/cuda").c_str());
  const std::string tmpdir = set("TMPDIR", tmp.c_str());
  auto r = KernelResourcesOf(kPtx, "sm_90");
  std::ifstream given_file(root + "/given");
  std::string given;
  std::getline(given_file, given);
  std::ifstream ptx_file(root + "/ptx");
  const std::string ptx(std::istreambuf_iterator<char>(ptx_file), {});
  auto bad = KernelResourcesOf(".version 8.0\nthis is not ptx", "sm_90");
  restore("CUDA_HOME", cuda_home);
  restore("TMPDIR", tmpdir);

  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->source, "ptxas -v (" + root + "/cuda/bin/ptxas)");
  EXPECT_EQ(r->kernels["k1"].registers, 7);
  EXPECT_EQ(r->kernels["k1"].shared_bytes, 1024);
  EXPECT_EQ(given.rfind(tmp + "/xlens-ptxas-", 0), 0u) << given;
  EXPECT_EQ(ptx, kPtx);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exit 255"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bad input"), std::string::npos) << bad.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "left behind in " << tmp;
}

}  // namespace
}  // namespace xlens::runtime
