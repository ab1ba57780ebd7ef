#include "compiler/runtime/cublas_library.h"

#include <mutex>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/runtime/dynamic_library.h"

namespace xlens::runtime {

namespace {

bool DefaultLayout(const Shape& s) {
  if (!s.has_layout()) return true;
  const std::vector<int64_t>& m2m = s.layout().minor_to_major;
  for (size_t i = 0; i < m2m.size(); ++i) {
    if (m2m[i] != static_cast<int64_t>(m2m.size() - 1 - i)) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> CublasCandidates() {
  return CudaLibraryCandidates({"libcublas.so.13", "libcublas.so.12", "libcublas.so"});
}

StatusOr<CublasLibrary> LoadCublasFrom(const std::vector<std::string>& candidates) {
  ASSIGN_OR_RETURN(DynamicLibrary opened, OpenFirstLibrary(candidates, "cuBLAS"));
  CublasLibrary lib;
  RETURN_IF_ERROR(ResolveSymbols(opened, {{lib.cublasCreate_v2, "cublasCreate_v2"},
                                          {lib.cublasDestroy_v2, "cublasDestroy_v2"},
                                          {lib.cublasSgemm_v2, "cublasSgemm_v2"},
                                          {lib.cublasGetStatusString, "cublasGetStatusString"}}));
  lib.path = opened.path;
  lib.handle = opened.handle;
  return lib;
}

StatusOr<const CublasLibrary*> LoadCublas() {
  static const StatusOr<CublasLibrary> loaded = LoadCublasFrom(CublasCandidates());
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

StatusOr<CublasGemm> MatchCublasGemm(const HloInstruction& hlo) {
  const HloInstruction* dot = &hlo;
  if (hlo.opcode() == HloOpcode::kFusion) {
    dot = hlo.fused_computation()->root_instruction();
    if (dot->opcode() != HloOpcode::kDot || dot->operand(0)->opcode() != HloOpcode::kParameter ||
        dot->operand(1)->opcode() != HloOpcode::kParameter ||
        dot->operand(0)->parameter_number() != 0 || dot->operand(1)->parameter_number() != 1 ||
        hlo.operand_count() != 2) {
      return Error("not a plain dot (a fusion that computes more than the dot of its parameters)");
    }
  } else if (hlo.opcode() != HloOpcode::kDot) {
    return Error("not a dot");
  }
  const Shape& ls = dot->operand(0)->shape();
  const Shape& rs = dot->operand(1)->shape();
  const Shape& out = hlo.shape();
  if (ls.element_type() != PrimitiveType::F32 || rs.element_type() != PrimitiveType::F32 ||
      out.element_type() != PrimitiveType::F32) {
    return Error("not f32 (cublasSgemm only)");
  }
  const DotDimensionNumbers& dn = *dot->dot_dimension_numbers;
  if (ls.rank() != 2 || rs.rank() != 2 || out.rank() != 2 || !dn.lhs_batch_dimensions.empty() ||
      dn.lhs_contracting_dimensions.size() != 1 || dn.rhs_contracting_dimensions.size() != 1) {
    return Error("not a rank-2 dot with one contracting dimension");
  }
  // The buffers are the operands of `hlo`: their layouts are what the runtime passes.
  if (!DefaultLayout(hlo.operand(0)->shape()) || !DefaultLayout(hlo.operand(1)->shape()) || !DefaultLayout(out)) {
    return Error("not row-major");
  }
  const int64_t lc = dn.lhs_contracting_dimensions[0], rc = dn.rhs_contracting_dimensions[0];
  CublasGemm g;
  const int64_t m = ls.dimensions(1 - lc), k = ls.dimensions(lc), n = rs.dimensions(1 - rc);
  constexpr int64_t kIntMax = 2147483647;
  if (m > kIntMax || n > kIntMax || k > kIntMax || m == 0 || n == 0) return Error("sizes out of cuBLAS's int range");
  // Row-major X[a,b] is column-major X^T with leading dimension b. C^T[N,M] = op(B) op(A):
  // rhs stored [K,N] is B^T as cuBLAS reads it (no transpose), stored [N,K] is B (transpose);
  // lhs stored [M,K] is A^T (no transpose), stored [K,M] is A (transpose).
  g.m = n;
  g.n = m;
  g.k = k;
  g.transpose_rhs = rc == 1;
  g.lda = rs.dimensions(1);
  g.transpose_lhs = lc == 0;
  g.ldb = ls.dimensions(1);
  g.ldc = n;
  return g;
}

StatusOr<CublasGemm> PlanCublasGemm(const HloInstruction& hlo, const GpuDevice& device) {
  if (!device.runs_cuda_libraries()) return Error("the device runs no CUDA libraries (the GPU simulator)");
  ASSIGN_OR_RETURN(CublasGemm gemm, MatchCublasGemm(hlo));
  RETURN_IF_ERROR(LoadCublas().status());
  return gemm;
}

Status RunCublasGemm(const CublasLibrary& library, const CublasGemm& g, uint64_t lhs, uint64_t rhs,
                     uint64_t result) {
  static std::mutex mu;
  static void* handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (handle == nullptr) {
      const int rc = library.cublasCreate_v2(&handle);
      if (rc != 0) {
        handle = nullptr;
        return Error(fmt::format("cublasCreate failed: {}", library.cublasGetStatusString(rc)));
      }
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  const int rc = library.cublasSgemm_v2(
      handle, g.transpose_rhs ? 1 : 0, g.transpose_lhs ? 1 : 0, static_cast<int>(g.m), static_cast<int>(g.n),
      static_cast<int>(g.k), &alpha, reinterpret_cast<const float*>(rhs), static_cast<int>(g.lda),
      reinterpret_cast<const float*>(lhs), static_cast<int>(g.ldb), &beta, reinterpret_cast<float*>(result),
      static_cast<int>(g.ldc));
  if (rc != 0) return Error(fmt::format("cublasSgemm failed: {}", library.cublasGetStatusString(rc)));
  return OkStatus();
}

}  // namespace xlens::runtime
