// Every corpus module the GPU backend compiles becomes PTX that NVIDIA's assembler accepts for
// sm_90. No GPU is needed: ptxas comes with the CUDA toolkit (the test skips where it is absent).
// Modules with what the GPU backend cannot compile (custom-calls, fft, complex arithmetic, ...)
// must be refused with a message that names the instruction.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/runtime/gpu_compiler.h"
#include "differential_harness.h"
#include "test_util.h"

namespace xlens {
namespace {

std::string FindPtxas() {
  for (const char* candidate : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}


// Runs `command`, returning its exit code and (in `output`) what it printed.
int RunCommand(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class GpuCompilerCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCompilerCorpusTest, PtxAssemblesForSm90) {
  const std::string dir = testing::HloCorpusDir();
  if (dir.empty()) GTEST_SKIP() << "corpus absent under " << XLENS_SHARED_DIR;
  const std::string ptxas = FindPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not found (the CUDA toolkit is not installed)";
  // Loaded as xlens run loads it: elided constants filled, bounded dynamic shapes at their bounds.
  auto module = testing::LoadCorpusModule(GetParam());
  if (!module.ok()) GTEST_SKIP() << module.status().message();
  runtime::GpuCompileOptions options;
  options.nvptx.gpu_arch = "sm_90";
  auto compiled = runtime::CompileForGpuToPtx(std::move(*module), options);
  if (!compiled.ok()) {
    const std::string message = compiled.status().message();
    EXPECT_THAT(message, ::testing::AnyOf(::testing::HasSubstr("cannot"), ::testing::HasSubstr("not supported"),
                                          ::testing::HasSubstr("no GPU implementation")))
        << message;
    GTEST_SKIP() << "the GPU backend refuses it: " << message;
  }
  EXPECT_THAT(compiled->ptx, ::testing::HasSubstr(".target sm_90"));
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("xlens_" + std::to_string(::getpid()) + "_" + GetParam() + ".ptx")).string();
  std::ofstream(file) << compiled->ptx;
  std::string output;
  const int rc = RunCommand(ptxas + " -arch=sm_90 " + file + " -o /dev/null", output);
  std::filesystem::remove(file);
  EXPECT_EQ(rc, 0) << output;
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuCompilerCorpusTest, ::testing::ValuesIn(testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return testing::TestNameOf(info.param); });

TEST(GpuCompilerTest, ABadArchitectureIsAUserError) {
  auto module = ParseHloModule("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n");
  ASSERT_TRUE(module.ok());
  runtime::GpuCompileOptions options;
  for (const char* arch : {"volta", "sm_9", "sm_a9", "sm_90b", "sm_", "sm_90aa"}) {
    auto copy = ParseHloModule(PrintModule(**module));
    ASSERT_TRUE(copy.ok());
    options.nvptx.gpu_arch = arch;
    auto compiled = runtime::CompileForGpuToPtx(std::move(*copy), options);
    ASSERT_FALSE(compiled.ok()) << arch;
    EXPECT_THAT(compiled.status().message(), ::testing::HasSubstr("expected an NVIDIA architecture such as sm_90"));
  }
}

TEST(GpuCompilerTest, NaiveEmittersUseOneThreadPerElementInBlocksOf256) {
  auto module = ParseHloModule("HloModule m\nENTRY e {\n  a = f32[1000] parameter(0)\n  ROOT n = f32[1000] exponential(a)\n}\n");
  ASSERT_TRUE(module.ok());
  runtime::GpuCompileOptions options;
  options.optimize.gpu_naive_emitters = true;
  auto compiled = runtime::CompileForGpuToPtx(std::move(*module), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  ASSERT_EQ(compiled->kernels.size(), 1u);
  EXPECT_EQ(compiled->kernels[0].threads_per_block, 256);
  EXPECT_EQ(compiled->kernels[0].blocks, 4);
  // exp comes from libdevice, inlined: no call is left in the kernel.
  EXPECT_THAT(compiled->ptx, ::testing::HasSubstr(".entry n("));
  EXPECT_THAT(compiled->ptx, ::testing::Not(::testing::HasSubstr("call.uni")));
}

TEST(GpuCompilerTest, ByDefaultEachThreadTakesFourFloatsIn128BitAccesses) {
  auto module = ParseHloModule("HloModule m\nENTRY e {\n  a = f32[1000] parameter(0)\n  ROOT n = f32[1000] exponential(a)\n}\n");
  ASSERT_TRUE(module.ok());
  auto compiled = runtime::CompileForGpuToPtx(std::move(*module), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  ASSERT_EQ(compiled->kernels.size(), 1u);
  EXPECT_EQ(compiled->kernels[0].threads_per_block, 256);  // 250 groups of 4, rounded to warps
  EXPECT_EQ(compiled->kernels[0].blocks, 1);
  EXPECT_THAT(compiled->ptx, ::testing::HasSubstr("ld.global.v4.f32"));
  EXPECT_THAT(compiled->ptx, ::testing::HasSubstr("st.global.v4.f32"));
}

}  // namespace
}  // namespace xlens
