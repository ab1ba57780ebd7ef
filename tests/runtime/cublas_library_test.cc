// cuBLAS through dlopen (compiler/runtime/cublas_library.h): the library is found and its entry
// points resolve where the CUDA toolkit is installed (no GPU needed); each plain dot maps to the
// column-major cublasSgemm call that computes its row-major result (checked by running that call's
// arguments through BLAS's definition of sgemm against the evaluator); dots cuBLAS does not take,
// and every dot on the GPU simulator, keep our own kernel; and where a CUDA driver is present the
// real call runs and agrees with the evaluator (skipped otherwise).
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cublas_library.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

std::string Dot(const std::string& lhs, const std::string& rhs, const std::string& out, int lc, int rc,
                const std::string& type = "f32") {
  return fmt::format(
      "HloModule dot\nENTRY main {{\n  x = {3}[{0}] parameter(0)\n  w = {3}[{1}] parameter(1)\n"
      "  ROOT d = {3}[{2}] dot(x, w), lhs_contracting_dims={{{4}}}, rhs_contracting_dims={{{5}}}\n}}\n",
      lhs, rhs, out, type, lc, rc);
}

TEST(CublasLibraryTest, FoundAndEntryPointsResolved) {
  if (!std::filesystem::exists("/usr/local/cuda/lib64")) {
    GTEST_SKIP() << "/usr/local/cuda is absent (no CUDA toolkit): nothing to load";
  }
  auto library = runtime::LoadCublas();
  ASSERT_TRUE(library.ok()) << library.status().message();
  EXPECT_THAT((*library)->path, HasSubstr("libcublas.so"));
  ASSERT_NE((*library)->cublasCreate_v2, nullptr);
  ASSERT_NE((*library)->cublasDestroy_v2, nullptr);
  ASSERT_NE((*library)->cublasSgemm_v2, nullptr);
  ASSERT_NE((*library)->cublasGetStatusString, nullptr);
  // The one entry point that needs no GPU: the resolved symbol is cuBLAS's own.
  EXPECT_STREQ((*library)->cublasGetStatusString(0), "success");  // CUBLAS_STATUS_SUCCESS
  EXPECT_STREQ((*library)->cublasGetStatusString(1), "the library was not initialized");
}

TEST(CublasLibraryTest, MissingLibraryIsNamed) {
  auto library = runtime::LoadCublasFrom({"/nonexistent/libcublas.so.99"});
  ASSERT_FALSE(library.ok());
  EXPECT_THAT(library.status().message(), HasSubstr("no cuBLAS found"));
  EXPECT_THAT(library.status().message(), HasSubstr("/nonexistent/libcublas.so.99"));
}

// BLAS's sgemm, column-major: C = op(A) op(B), op(A) m x k, op(B) k x n.
void ReferenceSgemm(bool transa, bool transb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = transa ? a[p + i * lda] : a[i + p * lda];
        const float bv = transb ? b[j + p * ldb] : b[p + j * ldb];
        sum += static_cast<double>(av) * bv;
      }
      c[i + j * ldc] = static_cast<float>(sum);
    }
  }
}

TEST(CublasLibraryTest, PlainDotsMapToTheSgemmThatComputesThem) {
  struct Case {
    std::string name, hlo;
    bool transpose_rhs, transpose_lhs;
  };
  const std::vector<Case> cases = {
      {"x[M,K] @ w[K,N]", Dot("5,7", "7,3", "5,3", 1, 0), false, false},
      {"x[M,K] @ w[N,K]^T", Dot("5,7", "3,7", "5,3", 1, 1), true, false},
      {"x[K,M]^T @ w[K,N]", Dot("7,5", "7,3", "5,3", 0, 0), false, true},
      {"x[K,M]^T @ w[N,K]^T", Dot("7,5", "3,7", "5,3", 0, 1), true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto module = ParseHloModule(c.hlo);
    ASSERT_TRUE(module.ok()) << module.status().message();
    const HloInstruction* dot = (*module)->entry_computation()->root_instruction();
    auto gemm = runtime::MatchCublasGemm(*dot);
    ASSERT_TRUE(gemm.ok()) << gemm.status().message();
    EXPECT_EQ(gemm->transpose_rhs, c.transpose_rhs);
    EXPECT_EQ(gemm->transpose_lhs, c.transpose_lhs);
    std::mt19937_64 rng(5);
    std::vector<Literal> args;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      args.push_back(MakeRandomLiteral(p->shape(), rng).value());
    }
    auto expected = EvaluateModule(**module, args);
    ASSERT_TRUE(expected.ok());
    Literal actual(dot->shape());
    ReferenceSgemm(gemm->transpose_rhs, gemm->transpose_lhs, gemm->m, gemm->n, gemm->k,
                   reinterpret_cast<const float*>(args[1].untyped_data()), gemm->lda,
                   reinterpret_cast<const float*>(args[0].untyped_data()), gemm->ldb,
                   reinterpret_cast<float*>(actual.untyped_data()), gemm->ldc);
    Status match = ExpectLiteralNear(*expected, actual, ErrorSpec{1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << match.message();
  }
}

TEST(CublasLibraryTest, RefusesWhatSgemmDoesNotCompute) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Dot("5,7", "7,3", "5,3", 1, 0, "f64"), "not f32"},
      {"HloModule b\nENTRY main {\n x = f32[2,5,7] parameter(0)\n w = f32[2,7,3] parameter(1)\n"
       " ROOT d = f32[2,5,3] dot(x, w), lhs_batch_dims={0}, rhs_batch_dims={0},"
       " lhs_contracting_dims={2}, rhs_contracting_dims={1}\n}\n", "rank-2"},
      {"HloModule e\nENTRY main {\n x = f32[5,7] parameter(0)\n ROOT e = f32[5,7] exponential(x)\n}\n",
       "not a dot"},
      {"HloModule f\nfused {\n x = f32[5,7] parameter(0)\n w = f32[7,3] parameter(1)\n"
       " d = f32[5,3] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
       " ROOT e = f32[5,3] exponential(d)\n}\nENTRY main {\n x = f32[5,7] parameter(0)\n"
       " w = f32[7,3] parameter(1)\n ROOT f = f32[5,3] fusion(x, w), kind=kOutput, calls=fused\n}\n",
       "not a plain dot"},
  };
  for (const auto& [hlo, why] : cases) {
    auto module = ParseHloModule(hlo);
    ASSERT_TRUE(module.ok()) << module.status().message();
    auto gemm = runtime::MatchCublasGemm(*(*module)->entry_computation()->root_instruction());
    ASSERT_FALSE(gemm.ok()) << hlo;
    EXPECT_THAT(gemm.status().message(), HasSubstr(why));
  }
}

// A device that says it runs CUDA libraries and runs nothing: where the choice is made.
class LibraryDevice : public runtime::GpuDevice {
 public:
  std::string arch() const override { return "sm_90"; }
  StatusOr<runtime::DevicePointer> Allocate(int64_t) override { return Error("unused"); }
  Status Free(runtime::DevicePointer) override { return OkStatus(); }
  Status CopyToDevice(runtime::DevicePointer, const void*, int64_t) override { return OkStatus(); }
  Status CopyFromDevice(void*, runtime::DevicePointer, int64_t) override { return OkStatus(); }
  StatusOr<runtime::GpuModuleHandle> LoadModule(const runtime::GpuModuleImage&) override { return 0; }
  Status Launch(runtime::GpuModuleHandle, const std::string&, const runtime::LaunchDimensions&,
                const std::vector<runtime::DevicePointer>&) override {
    return OkStatus();
  }
  Status Synchronize() override { return OkStatus(); }
  bool runs_cuda_libraries() const override { return true; }
};

TEST(CublasLibraryTest, OwnKernelOnTheSimulatorCublasWhereTheLibraryRuns) {
  const std::string text = Dot("64,100", "100,48", "64,48", 1, 0);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  const HloInstruction& dot = *(*module)->entry_computation()->root_instruction();
  LibraryDevice library_device;
  auto planned = runtime::PlanCublasGemm(dot, library_device);
  if (runtime::LoadCublas().ok()) {
    EXPECT_TRUE(planned.ok()) << planned.status().message();
  } else {
    ASSERT_FALSE(planned.ok());  // no library: our own kernel
    EXPECT_THAT(planned.status().message(), HasSubstr("no cuBLAS found"));
  }

  auto sim = runtime::OpenSimulatedGpuDevice();
  if (!sim.ok()) GTEST_SKIP() << sim.status().message();
  auto on_sim = runtime::PlanCublasGemm(dot, **sim);
  ASSERT_FALSE(on_sim.ok());
  EXPECT_THAT(on_sim.status().message(), HasSubstr("simulator"));
  auto exe = runtime::GpuExecutable::Create(std::move(*module), {}, **sim);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  ASSERT_FALSE((*exe)->launches().empty());
  for (const runtime::GpuLaunch& launch : (*exe)->launches()) EXPECT_EQ(launch.library, "");
}

TEST(CublasLibraryTest, RealDeviceRunsTheDotThroughCublas) {
  auto device = runtime::OpenCudaDevice();
  if (!device.ok()) GTEST_SKIP() << device.status().message();
  if (!runtime::LoadCublas().ok()) GTEST_SKIP() << runtime::LoadCublas().status().message();
  for (const std::string& text : {Dot("128,784", "784,256", "128,256", 1, 0), Dot("37,19", "53,19", "37,53", 1, 1)}) {
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok());
    std::mt19937_64 rng(9);
    std::vector<Literal> args;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      args.push_back(MakeRandomLiteral(p->shape(), rng).value());
    }
    auto expected = EvaluateModule(**module, args);
    ASSERT_TRUE(expected.ok());
    auto exe = runtime::GpuExecutable::Create(std::move(*module), {}, **device);
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    bool used = false;
    for (const runtime::GpuLaunch& launch : (*exe)->launches()) used |= launch.library == "cublas";
    EXPECT_TRUE(used);
    auto actual = (*exe)->Execute(args);
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-4, 1e-4});
    EXPECT_TRUE(match.ok()) << match.message();
  }
}

}  // namespace
}  // namespace xlens
