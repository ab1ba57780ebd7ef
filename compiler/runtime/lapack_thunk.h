// The LAPACK custom calls jax writes for linear algebra on a CPU (jaxlib's typed-FFI targets
// "lapack_<t><routine>_ffi", t one of s, d, c, z), run with the system's LAPACK and BLAS as jaxlib
// runs them with its own: the same arguments, results and `info` values, so that the HLO jax
// wrapped around each call (NaN for a failed cholesky, pivots made 0-based, ...) computes the same.
//
// The ABI, per matrix of the batch (the leading dimensions; frontend_attributes num_batch_dims):
//   potrf  (a) -> (a_out, info)                 uplo ('L' 76 / 'U' 85); the other triangle is a's
//   getrf  (a) -> (a_out, ipiv s32[min(m,n)], info)   ipiv 1-based, as LAPACK writes it
//   geqrf  (a) -> (a_out, tau[min(m,n)])
//   orgqr / ungqr (a, tau) -> (q)                q is m x n, k = size of tau
//   syevd / heevd (a) -> (v, w (real), info)     mode ('V' 86 / 'N' 78), uplo
//   gesdd  (a) -> (a_out, s (real), u, vt, info) mode ('A' 65 / 'S' 83 / 'N' 78: u, vt unused)
//   gesvd  as gesdd (jax's SvdAlgorithm.QR)
//   geev   (a) -> (wr, wi, vl, vr, info) real, vl and vr complex (pairs unpacked, zeros unless
//          info is 0); complex: (a) -> (w, vl, vr, info). compute_left, compute_right ('V'/'N');
//          a matrix that is not finite is not factored: info -4
//   gtsv   (dl, d, du, b) -> (dl, d, du, b, info)   tridiagonal solve; dl[0] and du[n-1] are
//          outside the matrix (LAPACK gets dl + 1)
//   trsm   (a, b [, alpha]) -> (b_out)   side, uplo, trans_x ('N'/'T'/'C'), diag ('N'/'U');
//                                        alpha, a scalar operand in older jaxlib, else 1
// Attributes are in backend_config as "{name = 76 : ui8, ...}". Any layout is read and written
// (each matrix goes through a column-major scratch copy); operands are never written, so the
// output_to_operand_aliasing jax asks for needs nothing.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

// Whether `target` is one of jaxlib's LAPACK targets (lapack_..._ffi), run here or not.
bool IsLapackCustomCallTarget(std::string_view target);

class LapackThunk : public Thunk {
 public:
  // Refuses, in one line, a routine, type, shape or attribute it does not run.
  static StatusOr<std::unique_ptr<LapackThunk>> Create(std::string hlo_name,
                                                       const HloInstruction& call,
                                                       std::vector<int64_t> operand_slots,
                                                       std::vector<int64_t> result_slots);
  ~LapackThunk() override;
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;
  // "potrf", "getrf", ...: the span kind says "lapack potrf".
  const std::string& routine() const { return routine_; }

  struct Impl;

 private:
  explicit LapackThunk(std::string hlo_name);

  std::unique_ptr<Impl> impl_;
  std::string routine_;
  std::string description_;  // "dpotrf, uplo L, 4 x f64[3,3]"
  std::vector<int64_t> operand_slots_, result_slots_, result_bytes_;
};

}  // namespace xlens::runtime
