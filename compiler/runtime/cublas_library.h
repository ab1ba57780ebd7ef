// cuBLAS for the GPU backend's plain dots on a real device, opened with dlopen (no link-time
// dependency: the few entry points are declared here, as <cublas_api.h> declares them). A dot
// that cuBLAS can compute (f32, one contracting dimension, no batch, default layouts, unfused or
// a fusion that is only that dot) is a cublasSgemm_v2 call instead of a launch of our own GEMM
// kernel; where libcublas or the CUDA driver is absent, and always on the GPU simulator, our own
// kernel runs (GpuExecutable chooses, GpuLaunch::library says which).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/gpu_device.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// libcublas's entry points, resolved.
struct CublasLibrary {
  std::string path;  // what dlopen loaded
  void* handle = nullptr;
  // cublasStatus_t is an int; cublasHandle_t a pointer; cublasOperation_t an int (0 N, 1 T).
  int (*cublasCreate_v2)(void** handle) = nullptr;
  int (*cublasDestroy_v2)(void* handle) = nullptr;
  int (*cublasSgemm_v2)(void* handle, int transa, int transb, int m, int n, int k, const float* alpha,
                        const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                        int ldc) = nullptr;
  const char* (*cublasGetStatusString)(int status) = nullptr;
};

// The libcublas names tried in order: $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader's
// search path, each as libcublas.so.13, .so.12 and .so.
std::vector<std::string> CublasCandidates();

// Loads the first of `candidates` that dlopen opens and resolves every entry point; an error
// that names what was tried, or the missing symbol. Not cached (tests pass their own lists).
StatusOr<CublasLibrary> LoadCublasFrom(const std::vector<std::string>& candidates);

// LoadCublasFrom(CublasCandidates()), once per process.
StatusOr<const CublasLibrary*> LoadCublas();

// One dot as a column-major cublasSgemm call computing the row-major result: C^T = op(B) op(A)
// with m = N, n = M (cuBLAS's names) and the buffers' leading dimensions.
struct CublasGemm {
  int64_t m = 0, n = 0, k = 0;  // cuBLAS's: rows of C^T (our N), columns (our M), contraction
  bool transpose_rhs = false;   // cuBLAS's transa (applied to our rhs buffer, its first operand)
  bool transpose_lhs = false;   // cuBLAS's transb (applied to our lhs buffer)
  int64_t lda = 0, ldb = 0, ldc = 0;  // of the rhs buffer, the lhs buffer and the result
};

// The call for `hlo` (an unfused dot, or a fusion whose root is a dot of two of its parameters),
// or why cuBLAS does not take it ("not a plain dot", "f64", ...).
StatusOr<CublasGemm> MatchCublasGemm(const HloInstruction& hlo);

// The cuBLAS call for `hlo` on `device`, or why our own kernel runs instead: the device is the
// simulator (or another that cannot run CUDA libraries), libcublas is absent, or the dot is not
// one cuBLAS takes.
StatusOr<CublasGemm> PlanCublasGemm(const HloInstruction& hlo, const GpuDevice& device);

// Runs `gemm` on device pointers (the lhs, rhs and result buffers) with a handle of `library`
// created on the first call, in the current CUDA context's null stream (where our kernels run).
Status RunCublasGemm(const CublasLibrary& library, const CublasGemm& gemm, uint64_t lhs, uint64_t rhs,
                     uint64_t result);

}  // namespace xlens::runtime
