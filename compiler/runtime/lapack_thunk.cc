#include "compiler/runtime/lapack_thunk.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "compiler/codegen/ir_array.h"

// The Fortran routines, called as gfortran compiles them: every argument by address, and the
// length of each character argument appended at the end.
extern "C" {
using lapack_cf = std::complex<float>;
using lapack_cd = std::complex<double>;
#define XLENS_POTRF(p, T) void p##potrf_(const char*, const int*, T*, const int*, int*, size_t);
XLENS_POTRF(s, float) XLENS_POTRF(d, double) XLENS_POTRF(c, lapack_cf) XLENS_POTRF(z, lapack_cd)
#define XLENS_GETRF(p, T) void p##getrf_(const int*, const int*, T*, const int*, int*, int*);
XLENS_GETRF(s, float) XLENS_GETRF(d, double) XLENS_GETRF(c, lapack_cf) XLENS_GETRF(z, lapack_cd)
#define XLENS_GEQRF(p, T) \
  void p##geqrf_(const int*, const int*, T*, const int*, T*, T*, const int*, int*);
XLENS_GEQRF(s, float) XLENS_GEQRF(d, double) XLENS_GEQRF(c, lapack_cf) XLENS_GEQRF(z, lapack_cd)
#define XLENS_ORGQR(name, T) \
  void name(const int*, const int*, const int*, T*, const int*, const T*, T*, const int*, int*);
XLENS_ORGQR(sorgqr_, float) XLENS_ORGQR(dorgqr_, double) XLENS_ORGQR(cungqr_, lapack_cf)
XLENS_ORGQR(zungqr_, lapack_cd)
#define XLENS_SYEVD(name, T)                                                                 \
  void name(const char*, const char*, const int*, T*, const int*, T*, T*, const int*, int*, \
            const int*, int*, size_t, size_t);
XLENS_SYEVD(ssyevd_, float) XLENS_SYEVD(dsyevd_, double)
#define XLENS_HEEVD(name, T, R)                                                                \
  void name(const char*, const char*, const int*, T*, const int*, R*, T*, const int*, R*,     \
            const int*, int*, const int*, int*, size_t, size_t);
XLENS_HEEVD(cheevd_, lapack_cf, float) XLENS_HEEVD(zheevd_, lapack_cd, double)
#define XLENS_GESDD(name, T)                                                                   \
  void name(const char*, const int*, const int*, T*, const int*, T*, T*, const int*, T*,      \
            const int*, T*, const int*, int*, int*, size_t);
XLENS_GESDD(sgesdd_, float) XLENS_GESDD(dgesdd_, double)
#define XLENS_CGESDD(name, T, R)                                                               \
  void name(const char*, const int*, const int*, T*, const int*, R*, T*, const int*, T*,      \
            const int*, T*, const int*, R*, int*, int*, size_t);
XLENS_CGESDD(cgesdd_, lapack_cf, float) XLENS_CGESDD(zgesdd_, lapack_cd, double)
#define XLENS_GESVD(name, T)                                                                   \
  void name(const char*, const char*, const int*, const int*, T*, const int*, T*, T*,         \
            const int*, T*, const int*, T*, const int*, int*, size_t, size_t);
XLENS_GESVD(sgesvd_, float) XLENS_GESVD(dgesvd_, double)
#define XLENS_CGESVD(name, T, R)                                                               \
  void name(const char*, const char*, const int*, const int*, T*, const int*, R*, T*,         \
            const int*, T*, const int*, T*, const int*, R*, int*, size_t, size_t);
XLENS_CGESVD(cgesvd_, lapack_cf, float) XLENS_CGESVD(zgesvd_, lapack_cd, double)
#define XLENS_GEEV(name, T)                                                                    \
  void name(const char*, const char*, const int*, T*, const int*, T*, T*, T*, const int*, T*, \
            const int*, T*, const int*, int*, size_t, size_t);
XLENS_GEEV(sgeev_, float) XLENS_GEEV(dgeev_, double)
#define XLENS_CGEEV(name, T, R)                                                                \
  void name(const char*, const char*, const int*, T*, const int*, T*, T*, const int*, T*,     \
            const int*, T*, const int*, R*, int*, size_t, size_t);
XLENS_CGEEV(cgeev_, lapack_cf, float) XLENS_CGEEV(zgeev_, lapack_cd, double)
#define XLENS_GTSV(p, T) \
  void p##gtsv_(const int*, const int*, T*, T*, T*, T*, const int*, int*);
XLENS_GTSV(s, float) XLENS_GTSV(d, double) XLENS_GTSV(c, lapack_cf) XLENS_GTSV(z, lapack_cd)
#define XLENS_TRSM(p, T)                                                                       \
  void p##trsm_(const char*, const char*, const char*, const char*, const int*, const int*,   \
                const T*, const T*, const int*, T*, const int*, size_t, size_t, size_t, size_t);
XLENS_TRSM(s, float) XLENS_TRSM(d, double) XLENS_TRSM(c, lapack_cf) XLENS_TRSM(z, lapack_cd)
}

namespace xlens::runtime {
namespace {

// The routines of one element type, with the workspace queries folded in.
template <typename T> struct Lapack;

#define XLENS_LAPACK_TYPE(T, R, p, orgqr)                                                       \
  template <> struct Lapack<T> {                                                              \
    using Real = R;                                                                           \
    static void Potrf(char uplo, int n, T* a, int* info) { p##potrf_(&uplo, &n, a, &n, info, 1); } \
    static void Getrf(int m, int n, T* a, int* ipiv, int* info) {                             \
      p##getrf_(&m, &n, a, &m, ipiv, info);                                                   \
    }                                                                                         \
    static void Geqrf(int m, int n, T* a, T* tau, std::vector<T>& work) {                     \
      int info = 0, lwork = -1;                                                               \
      T query{};                                                                              \
      p##geqrf_(&m, &n, a, &m, tau, &query, &lwork, &info);                                   \
      lwork = std::max(1, static_cast<int>(std::real(query)));                                \
      work.resize(lwork);                                                                     \
      p##geqrf_(&m, &n, a, &m, tau, work.data(), &lwork, &info);                              \
    }                                                                                         \
    static void Orgqr(int m, int n, int k, T* a, const T* tau, std::vector<T>& work) {        \
      int info = 0, lwork = -1;                                                               \
      T query{};                                                                              \
      orgqr(&m, &n, &k, a, &m, tau, &query, &lwork, &info);                                   \
      lwork = std::max(1, static_cast<int>(std::real(query)));                                \
      work.resize(lwork);                                                                     \
      orgqr(&m, &n, &k, a, &m, tau, work.data(), &lwork, &info);                              \
    }                                                                                         \
    static void Gtsv(int n, int nrhs, T* dl, T* d, T* du, T* b, int* info) {                 \
      p##gtsv_(&n, &nrhs, dl, d, du, b, &n, info);                                            \
    }                                                                                         \
    static void Trsm(char side, char uplo, char trans, char diag, int m, int n, T alpha,      \
                     const T* a, int lda, T* b) {                                             \
      p##trsm_(&side, &uplo, &trans, &diag, &m, &n, &alpha, a, &lda, b, &m, 1, 1, 1, 1);      \
    }                                                                                         \
  };
XLENS_LAPACK_TYPE(float, float, s, sorgqr_)
XLENS_LAPACK_TYPE(double, double, d, dorgqr_)
XLENS_LAPACK_TYPE(lapack_cf, float, c, cungqr_)
XLENS_LAPACK_TYPE(lapack_cd, double, z, zungqr_)

// Workspaces kept across the matrices of one call.
template <typename T>
struct Workspace {
  std::vector<T> work;
  std::vector<typename Lapack<T>::Real> rwork;
  std::vector<int> iwork;
};

template <typename T>
void Eigh(char jobz, char uplo, int n, T* a, typename Lapack<T>::Real* w, Workspace<T>& ws,
          int* info) {
  int lwork = -1, liwork = -1, lrwork = -1, iquery = 0;
  T query{};
  typename Lapack<T>::Real rquery{};
  auto call = [&](T* work, typename Lapack<T>::Real* rwork, int* iwork) {
    if constexpr (std::is_same_v<T, float>) {
      ssyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, double>) {
      dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, lapack_cf>) {
      cheevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
    } else {
      zheevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
    }
  };
  call(&query, &rquery, &iquery);
  lwork = std::max(1, static_cast<int>(std::real(query)));
  lrwork = std::max(1, static_cast<int>(rquery));
  liwork = std::max(1, iquery);
  ws.work.resize(lwork);
  ws.rwork.resize(lrwork);
  ws.iwork.resize(liwork);
  call(ws.work.data(), ws.rwork.data(), ws.iwork.data());
}

template <typename T>
void Gesdd(char jobz, int m, int n, T* a, typename Lapack<T>::Real* s, T* u, int ldu, T* vt,
           int ldvt, Workspace<T>& ws, int* info) {
  const int mn = std::min(m, n), mx = std::max(m, n);
  ws.iwork.resize(std::max(1, 8 * mn));
  int lwork = -1;
  T query{};
  auto call = [&](T* work) {
    if constexpr (std::is_same_v<T, float>) {
      sgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.iwork.data(), info, 1);
    } else if constexpr (std::is_same_v<T, double>) {
      dgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.iwork.data(), info, 1);
    } else if constexpr (std::is_same_v<T, lapack_cf>) {
      cgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.rwork.data(),
              ws.iwork.data(), info, 1);
    } else {
      zgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.rwork.data(),
              ws.iwork.data(), info, 1);
    }
  };
  if constexpr (!std::is_floating_point_v<T>) {
    // LAPACK's bound on the real workspace of the complex routines.
    const int64_t lrwork =
        jobz == 'N' ? 7 * int64_t{mn}
                    : std::max<int64_t>(5 * int64_t{mn} * mn + 5 * mn,
                                        2 * int64_t{mx} * mn + 2 * int64_t{mn} * mn + mn);
    ws.rwork.resize(std::max<int64_t>(1, lrwork));
  }
  call(&query);
  lwork = std::max(1, static_cast<int>(std::real(query)));
  ws.work.resize(lwork);
  call(ws.work.data());
}

// gesvd (jax's SvdAlgorithm.QR): the same results as gesdd, jobu = jobvt = the mode.
template <typename T>
void Gesvd(char job, int m, int n, T* a, typename Lapack<T>::Real* s, T* u, int ldu, T* vt,
           int ldvt, Workspace<T>& ws, int* info) {
  int lwork = -1;
  T query{};
  auto call = [&](T* work) {
    if constexpr (std::is_same_v<T, float>) {
      sgesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, double>) {
      dgesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, lapack_cf>) {
      cgesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.rwork.data(),
              info, 1, 1);
    } else {
      zgesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, ws.rwork.data(),
              info, 1, 1);
    }
  };
  if constexpr (!std::is_floating_point_v<T>) ws.rwork.resize(std::max(1, 5 * std::min(m, n)));
  call(&query);
  lwork = std::max(1, static_cast<int>(std::real(query)));
  ws.work.resize(lwork);
  call(ws.work.data());
}

// geev: the eigenvalues of a general matrix (wr, wi for a real one; w for a complex one) and,
// where asked, its left and right eigenvectors (n x n, leading dimension n).
template <typename T>
void Geev(char jobvl, char jobvr, int n, T* a, T* w, T* wi, T* vl, T* vr, Workspace<T>& ws,
          int* info) {
  int lwork = -1;
  T query{};
  auto call = [&](T* work) {
    if constexpr (std::is_same_v<T, float>) {
      sgeev_(&jobvl, &jobvr, &n, a, &n, w, wi, vl, &n, vr, &n, work, &lwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, double>) {
      dgeev_(&jobvl, &jobvr, &n, a, &n, w, wi, vl, &n, vr, &n, work, &lwork, info, 1, 1);
    } else if constexpr (std::is_same_v<T, lapack_cf>) {
      cgeev_(&jobvl, &jobvr, &n, a, &n, w, vl, &n, vr, &n, work, &lwork, ws.rwork.data(), info,
             1, 1);
    } else {
      zgeev_(&jobvl, &jobvr, &n, a, &n, w, vl, &n, vr, &n, work, &lwork, ws.rwork.data(), info,
             1, 1);
    }
  };
  if constexpr (!std::is_floating_point_v<T>) ws.rwork.resize(std::max(1, 2 * n));
  call(&query);
  lwork = std::max(1, static_cast<int>(std::real(query)));
  ws.work.resize(lwork);
  call(ws.work.data());
}

// A real geev's eigenvectors as complex ones: a complex pair of eigenvalues (wi[j] != 0, then
// its conjugate) has its vectors in columns j and j + 1 as real and imaginary parts.
template <typename R>
void UnpackEigenvectors(int n, const R* wi, const R* packed, std::complex<R>* vectors) {
  for (int j = 0; j < n; ++j) {
    if (wi[j] != 0 && !std::isnan(wi[j]) && j + 1 < n) {
      for (int i = 0; i < n; ++i) {
        const std::complex<R> v(packed[i + j * n], packed[i + (j + 1) * n]);
        vectors[i + j * n] = v;
        vectors[i + (j + 1) * n] = std::conj(v);
      }
      ++j;
    } else {
      for (int i = 0; i < n; ++i) vectors[i + j * n] = packed[i + j * n];
    }
  }
}

// One operand or result: its batch dimensions (the leading ones) and, after them, a matrix
// (inner rank 2), a vector (1) or a scalar (0) per batch element, read and written in the
// array's own layout.
struct Batched {
  int64_t rows = 1, cols = 1, row_stride = 0, column_stride = 0;
  std::vector<int64_t> offsets;  // per batch element, in row-major order of the batch index

  static std::optional<Batched> Of(const Shape& shape, int64_t batch_rank, int64_t inner_rank) {
    if (!shape.IsArray() || shape.rank() != batch_rank + inner_rank) return std::nullopt;
    Batched b;
    const std::vector<int64_t> strides = codegen::LayoutStrides(shape);
    if (inner_rank >= 1) {
      b.rows = shape.dimensions(batch_rank);
      b.row_stride = strides[batch_rank];
    }
    if (inner_rank == 2) {
      b.cols = shape.dimensions(batch_rank + 1);
      b.column_stride = strides[batch_rank + 1];
    }
    std::vector<int64_t> index(batch_rank, 0);
    int64_t count = 1;
    for (int64_t d = 0; d < batch_rank; ++d) count *= shape.dimensions(d);
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = 0;
      for (int64_t d = 0; d < batch_rank; ++d) offset += index[d] * strides[d];
      b.offsets.push_back(offset);
      for (int64_t d = batch_rank - 1; d >= 0; --d) {
        if (++index[d] < shape.dimensions(d)) break;
        index[d] = 0;
      }
    }
    return b;
  }

  // Batch element `i` into a column-major scratch array (leading dimension rows).
  template <typename E>
  void Gather(const char* buffer, int64_t i, E* to) const {
    const E* from = reinterpret_cast<const E*>(buffer) + offsets[i];
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) {
        to[r + c * rows] = from[r * row_stride + c * column_stride];
      }
    }
  }
  template <typename E>
  void Scatter(const E* from, char* buffer, int64_t i) const {
    E* to = reinterpret_cast<E*>(buffer) + offsets[i];
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) {
        to[r * row_stride + c * column_stride] = from[r + c * rows];
      }
    }
  }
  int64_t size() const { return rows * cols; }
};

enum class Routine { kPotrf, kGetrf, kGeqrf, kOrgqr, kEigh, kGesdd, kGesvd, kGeev, kGtsv, kTrsm };

struct Call {
  Routine routine;
  char uplo = 'L', mode = 'N', side = 'L', trans = 'N', diag = 'N';
  char left = 'N', right = 'N';  // geev: which eigenvectors
  std::vector<Batched> operands, results;
};

}  // namespace

struct LapackThunk::Impl {
  virtual ~Impl() = default;
  virtual void Run(const std::vector<const char*>& operands,
                   const std::vector<char*>& results) const = 0;
};

namespace {

template <typename T>
class LapackRunner : public LapackThunk::Impl {
 public:
  using Real = typename Lapack<T>::Real;
  explicit LapackRunner(Call call) : call_(std::move(call)) {}

  void Run(const std::vector<const char*>& in, const std::vector<char*>& out) const override {
    const Batched& x = call_.operands[0];
    const int64_t batch = static_cast<int64_t>(x.offsets.size());
    const int m = static_cast<int>(x.rows), n = static_cast<int>(x.cols);
    std::vector<T> a(x.size());
    Workspace<T> ws;
    for (int64_t b = 0; b < batch; ++b) {
      x.Gather(in[0], b, a.data());
      int info = 0;
      switch (call_.routine) {
        case Routine::kPotrf:
          if (n > 0) Lapack<T>::Potrf(call_.uplo, n, a.data(), &info);
          Put(a.data(), out, 0, b);
          Put(&info, out, 1, b);
          break;
        case Routine::kGetrf: {
          std::vector<int> ipiv(std::min(m, n));
          if (m > 0 && n > 0) Lapack<T>::Getrf(m, n, a.data(), ipiv.data(), &info);
          Put(a.data(), out, 0, b);
          Put(ipiv.data(), out, 1, b);
          Put(&info, out, 2, b);
          break;
        }
        case Routine::kGeqrf: {
          std::vector<T> tau(std::min(m, n));
          if (m > 0 && n > 0) Lapack<T>::Geqrf(m, n, a.data(), tau.data(), ws.work);
          Put(a.data(), out, 0, b);
          Put(tau.data(), out, 1, b);
          break;
        }
        case Routine::kOrgqr: {
          const Batched& t = call_.operands[1];
          std::vector<T> tau(t.size());
          t.Gather(in[1], b, tau.data());
          if (m > 0 && n > 0) {
            Lapack<T>::Orgqr(m, n, static_cast<int>(t.size()), a.data(), tau.data(), ws.work);
          }
          Put(a.data(), out, 0, b);
          break;
        }
        case Routine::kEigh: {
          std::vector<Real> w(n);
          if (n > 0) Eigh<T>(call_.mode, call_.uplo, n, a.data(), w.data(), ws, &info);
          Put(a.data(), out, 0, b);
          Put(w.data(), out, 1, b);
          Put(&info, out, 2, b);
          break;
        }
        case Routine::kGesdd:
        case Routine::kGesvd: {
          const Batched& u = call_.results[2];
          const Batched& vt = call_.results[3];
          std::vector<Real> s(std::min(m, n));
          // With mode 'N' LAPACK writes neither u nor vt; they are returned as zeros.
          std::vector<T> ub(std::max<int64_t>(1, u.size())), vtb(std::max<int64_t>(1, vt.size()));
          const bool uv = call_.mode != 'N';
          if (m > 0 && n > 0) {
            const int ldu = uv ? std::max<int>(1, u.rows) : 1;
            const int ldvt = uv ? std::max<int>(1, vt.rows) : 1;
            (call_.routine == Routine::kGesdd ? Gesdd<T> : Gesvd<T>)(
                call_.mode, m, n, a.data(), s.data(), ub.data(), ldu, vtb.data(), ldvt, ws, &info);
          }
          Put(a.data(), out, 0, b);
          Put(s.data(), out, 1, b);
          Put(ub.data(), out, 2, b);
          Put(vtb.data(), out, 3, b);
          Put(&info, out, 4, b);
          break;
        }
        case Routine::kGeev: {
          std::vector<T> w(n), wi(n), vl(std::max(1, n * n)), vr(std::max(1, n * n));
          // As jaxlib: a matrix with an infinity or NaN is not given to LAPACK; info is -4.
          bool finite = true;
          for (const T& v : a) finite &= std::isfinite(std::abs(v));
          if (!finite) {
            info = -4;
          } else if (n > 0) {
            Geev<T>(call_.left, call_.right, n, a.data(), w.data(), wi.data(), vl.data(),
                    vr.data(), ws, &info);
          }
          if constexpr (std::is_floating_point_v<T>) {
            // As jaxlib: the vectors made complex only when LAPACK succeeded (else zeros).
            std::vector<std::complex<T>> cvl(n * n), cvr(n * n);
            if (info == 0 && call_.left == 'V') {
              UnpackEigenvectors(n, wi.data(), vl.data(), cvl.data());
            }
            if (info == 0 && call_.right == 'V') {
              UnpackEigenvectors(n, wi.data(), vr.data(), cvr.data());
            }
            Put(w.data(), out, 0, b);
            Put(wi.data(), out, 1, b);
            Put(cvl.data(), out, 2, b);
            Put(cvr.data(), out, 3, b);
            Put(&info, out, 4, b);
          } else {
            Put(w.data(), out, 0, b);
            Put(vl.data(), out, 1, b);
            Put(vr.data(), out, 2, b);
            Put(&info, out, 3, b);
          }
          break;
        }
        case Routine::kGtsv: {
          // a holds dl, whose first element is not part of the matrix (jax's convention).
          const Batched& rhs = call_.operands[3];
          std::vector<T> d(m), du(m), bm(rhs.size());
          call_.operands[1].Gather(in[1], b, d.data());
          call_.operands[2].Gather(in[2], b, du.data());
          rhs.Gather(in[3], b, bm.data());
          if (m > 0) {
            Lapack<T>::Gtsv(m, static_cast<int>(rhs.cols), a.data() + 1, d.data(), du.data(),
                            bm.data(), &info);
          }
          Put(a.data(), out, 0, b);
          Put(d.data(), out, 1, b);
          Put(du.data(), out, 2, b);
          Put(bm.data(), out, 3, b);
          Put(&info, out, 4, b);
          break;
        }
        case Routine::kTrsm: {
          // a is the triangular matrix (operand 0), b the right-hand sides (operand 1).
          const Batched& rhs = call_.operands[1];
          std::vector<T> bm(rhs.size());
          rhs.Gather(in[1], b, bm.data());
          const int rows = static_cast<int>(rhs.rows), cols = static_cast<int>(rhs.cols);
          if (rows > 0 && cols > 0) {
            // Older jaxlib passes alpha as a third operand (a scalar); newer has 1.
            const T alpha = in.size() > 2 ? *reinterpret_cast<const T*>(in[2]) : T(1);
            Lapack<T>::Trsm(call_.side, call_.uplo, call_.trans, call_.diag, rows, cols, alpha,
                            a.data(), std::max(1, m), bm.data());
          }
          Put(bm.data(), out, 0, b);
          break;
        }
      }
    }
  }

 private:
  template <typename E>
  void Put(const E* from, const std::vector<char*>& out, size_t result, int64_t b) const {
    call_.results[result].Scatter(from, out[result], b);
  }

  Call call_;
};

// "{diag = 85 : ui8, side = 76 : ui8}" -> the value of `key` as a character ('U'), if present.
std::optional<char> CharAttribute(const std::string& config, std::string_view key) {
  size_t at = 0;
  while ((at = config.find(key, at)) != std::string::npos) {
    const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(config[at - 1])) ||
                                     config[at - 1] == '_');
    size_t p = at + key.size();
    at = p;
    if (!starts) continue;
    while (p < config.size() && config[p] == ' ') ++p;
    if (p >= config.size() || config[p] != '=') continue;
    ++p;
    while (p < config.size() && config[p] == ' ') ++p;
    int value = 0;
    size_t digits = 0;
    while (p < config.size() && std::isdigit(static_cast<unsigned char>(config[p]))) {
      value = value * 10 + (config[p++] - '0');
      ++digits;
    }
    if (digits == 0 || value <= 0 || value > 127) return std::nullopt;
    return static_cast<char>(value);
  }
  return std::nullopt;
}

struct TargetName {
  char type;          // s, d, c, z
  std::string name;   // potrf, orgqr, ...
};

std::optional<TargetName> ParseTarget(std::string_view target) {
  constexpr std::string_view kPrefix = "lapack_", kSuffix = "_ffi";
  if (target.size() <= kPrefix.size() + kSuffix.size() + 1 ||
      target.substr(0, kPrefix.size()) != kPrefix ||
      target.substr(target.size() - kSuffix.size()) != kSuffix) {
    return std::nullopt;
  }
  std::string_view body = target.substr(kPrefix.size(),
                                        target.size() - kPrefix.size() - kSuffix.size());
  if (std::string_view("sdcz").find(body[0]) == std::string_view::npos) return std::nullopt;
  return TargetName{body[0], std::string(body.substr(1))};
}

PrimitiveType TypeOf(char t) {
  switch (t) {
    case 's': return PrimitiveType::F32;
    case 'd': return PrimitiveType::F64;
    case 'c': return PrimitiveType::C64;
    default: return PrimitiveType::C128;
  }
}

PrimitiveType RealTypeOf(char t) {
  return t == 's' || t == 'c' ? PrimitiveType::F32 : PrimitiveType::F64;
}

}  // namespace

bool IsLapackCustomCallTarget(std::string_view target) { return ParseTarget(target).has_value(); }

LapackThunk::LapackThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
LapackThunk::~LapackThunk() = default;

StatusOr<std::unique_ptr<LapackThunk>> LapackThunk::Create(std::string hlo_name,
                                                           const HloInstruction& hlo,
                                                           std::vector<int64_t> operand_slots,
                                                           std::vector<int64_t> result_slots) {
  const std::string target = hlo.custom_call_target.value_or("");
  auto fail = [&](const std::string& what) {
    return Error(fmt::format("{}: custom-call \"{}\": {}", hlo.name(), target, what));
  };
  std::optional<TargetName> parsed = ParseTarget(target);
  if (!parsed) return fail("is not a LAPACK target (lapack_<s|d|c|z><routine>_ffi)");
  const bool complex = parsed->type == 'c' || parsed->type == 'z';
  Call call;
  // The element type of each result leaf and operand, and its inner rank (2 matrix, 1 vector,
  // 0 scalar per batch element).
  struct Part { PrimitiveType type; int64_t inner_rank; };
  std::vector<Part> operands, results;
  const PrimitiveType t = TypeOf(parsed->type), real = RealTypeOf(parsed->type);
  const PrimitiveType s32 = PrimitiveType::S32;
  const std::string& r = parsed->name;
  if (r == "potrf") {
    call.routine = Routine::kPotrf;
    operands = {{t, 2}};
    results = {{t, 2}, {s32, 0}};
  } else if (r == "getrf") {
    call.routine = Routine::kGetrf;
    operands = {{t, 2}};
    results = {{t, 2}, {s32, 1}, {s32, 0}};
  } else if (r == "geqrf") {
    call.routine = Routine::kGeqrf;
    operands = {{t, 2}};
    results = {{t, 2}, {t, 1}};
  } else if ((r == "orgqr" && !complex) || (r == "ungqr" && complex)) {
    call.routine = Routine::kOrgqr;
    operands = {{t, 2}, {t, 1}};
    results = {{t, 2}};
  } else if ((r == "syevd" && !complex) || (r == "heevd" && complex)) {
    call.routine = Routine::kEigh;
    operands = {{t, 2}};
    results = {{t, 2}, {real, 1}, {s32, 0}};
  } else if (r == "gesdd" || r == "gesvd") {
    call.routine = r == "gesdd" ? Routine::kGesdd : Routine::kGesvd;
    operands = {{t, 2}};
    results = {{t, 2}, {real, 1}, {t, 2}, {t, 2}, {s32, 0}};
  } else if (r == "geev") {
    call.routine = Routine::kGeev;
    operands = {{t, 2}};
    const PrimitiveType c = real == PrimitiveType::F32 ? PrimitiveType::C64 : PrimitiveType::C128;
    results = complex ? std::vector<Part>{{t, 1}, {t, 2}, {t, 2}, {s32, 0}}
                      : std::vector<Part>{{real, 1}, {real, 1}, {c, 2}, {c, 2}, {s32, 0}};
  } else if (r == "gtsv") {
    call.routine = Routine::kGtsv;
    operands = {{t, 1}, {t, 1}, {t, 1}, {t, 2}};
    results = {{t, 1}, {t, 1}, {t, 1}, {t, 2}, {s32, 0}};
  } else if (r == "trsm") {
    call.routine = Routine::kTrsm;
    operands = {{t, 2}, {t, 2}};
    results = {{t, 2}};
  } else {
    return fail("is a LAPACK routine xlens does not run (it runs potrf, getrf, geqrf, orgqr, "
                "ungqr, syevd, heevd, gesdd, gesvd, geev, gtsv and trsm)");
  }
  // trsm's older form passes alpha as a third operand, a scalar.
  const size_t operand_count = hlo.operand_count();
  if (operand_count != operands.size() &&
      !(call.routine == Routine::kTrsm && operand_count == 3)) {
    return fail(fmt::format("takes {} operand{}, not {}", operands.size(),
                            operands.size() == 1 ? "" : "s", operand_count));
  }
  if (operand_count == 3 && call.routine == Routine::kTrsm) {
    const Shape& alpha = hlo.operand(2)->shape();
    if (!alpha.IsArray() || alpha.rank() != 0 || alpha.element_type() != t) {
      return fail(fmt::format("alpha (operand 2) is {}, expected a {} scalar",
                              alpha.ToString(false), PrimitiveTypeName(t)));
    }
  }
  std::vector<Shape> result_shapes;
  if (hlo.shape().IsTuple()) {
    hlo.shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
      if (s.IsArray()) result_shapes.push_back(s);
    });
  } else {
    result_shapes.push_back(hlo.shape());
  }
  if (result_shapes.size() != results.size()) {
    return fail(fmt::format("gives {} results, not {}", results.size(), result_shapes.size()));
  }
  // The matrix operand: gtsv's right-hand sides, after its three diagonals.
  const Shape& x = hlo.operand(call.routine == Routine::kGtsv ? 3 : 0)->shape();
  if (!x.IsArray() || x.rank() < 2) {
    return fail(fmt::format("takes a batch of matrices, not {}", x.ToString(false)));
  }
  const int64_t batch_rank = x.rank() - 2;
  auto add = [&](const Shape& shape, const Part& part, const char* what, int64_t i,
                 std::vector<Batched>& to) -> Status {
    std::optional<Batched> b = Batched::Of(shape, batch_rank, part.inner_rank);
    bool same_batch = b.has_value() && shape.element_type() == part.type;
    for (int64_t d = 0; same_batch && d < batch_rank; ++d) {
      same_batch = shape.dimensions(d) == x.dimensions(d);
    }
    if (!same_batch) {
      return Error(fmt::format(
          "{}: custom-call \"{}\": {} {} is {}, expected {} with the batch dimensions of "
          "operand 0 and {} more",
          hlo.name(), target, what, i, shape.ToString(false), PrimitiveTypeName(part.type),
          part.inner_rank));
    }
    to.push_back(std::move(*b));
    return OkStatus();
  };
  for (size_t i = 0; i < operands.size(); ++i) {
    RETURN_IF_ERROR(add(hlo.operand(i)->shape(), operands[i], "operand", i, call.operands));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    RETURN_IF_ERROR(add(result_shapes[i], results[i], "result", i, call.results));
  }
  // Shapes the routine's arguments imply.
  const int64_t m = x.dimensions(batch_rank), n = x.dimensions(batch_rank + 1);
  const Batched& out0 = call.results[0];
  bool shapes_fit = out0.rows == (call.routine == Routine::kTrsm ? call.operands[1].rows : m) &&
                    out0.cols == (call.routine == Routine::kTrsm ? call.operands[1].cols : n);
  if (call.routine == Routine::kGtsv) {
    shapes_fit = call.results[3].rows == m && call.results[3].cols == n;
    for (int i = 0; i < 3; ++i) {
      shapes_fit &= call.operands[i].rows == m && call.results[i].rows == m;
    }
  }
  if (call.routine == Routine::kGeev) {
    shapes_fit = m == n && out0.rows == n;
    for (size_t i = 1; i + 1 < call.results.size(); ++i) {
      const Batched& part = call.results[i];
      shapes_fit &= part.rows == n && (part.cols == n || part.cols == 1);
    }
  }
  if (call.routine == Routine::kPotrf || call.routine == Routine::kEigh) shapes_fit &= m == n;
  if (call.routine == Routine::kGetrf || call.routine == Routine::kGeqrf) {
    shapes_fit &= call.results[1].rows == std::min(m, n);
  }
  if (call.routine == Routine::kEigh || call.routine == Routine::kGesdd ||
      call.routine == Routine::kGesvd) {
    shapes_fit &= call.results[1].rows == std::min(m, n);
  }
  if (call.routine == Routine::kOrgqr) shapes_fit &= call.operands[1].rows <= n && n <= m;
  std::string config;
  if (const std::string* raw = hlo.raw_attribute("backend_config")) config = *raw;
  auto attribute = [&](std::string_view key, std::string_view allowed, char fallback,
                       bool required) -> StatusOr<char> {
    std::optional<char> value = CharAttribute(config, key);
    if (!value) {
      if (!required) return fallback;
      return Error(fmt::format("{}: custom-call \"{}\": backend_config has no {} (one of '{}')",
                               hlo.name(), target, key, allowed));
    }
    if (allowed.find(*value) == std::string_view::npos) {
      return Error(fmt::format("{}: custom-call \"{}\": {} = {} is not one of '{}'", hlo.name(),
                               target, key, static_cast<int>(*value), allowed));
    }
    return *value;
  };
  std::string attrs;
  switch (call.routine) {
    case Routine::kPotrf: {
      ASSIGN_OR_RETURN(call.uplo, attribute("uplo", "LU", 'L', true));
      attrs = fmt::format(", uplo {}", call.uplo);
      break;
    }
    case Routine::kEigh: {
      ASSIGN_OR_RETURN(call.uplo, attribute("uplo", "LU", 'L', true));
      ASSIGN_OR_RETURN(call.mode, attribute("mode", "VN", 'V', true));
      attrs = fmt::format(", mode {}, uplo {}", call.mode, call.uplo);
      break;
    }
    case Routine::kGesdd:
    case Routine::kGesvd: {
      ASSIGN_OR_RETURN(call.mode, attribute("mode", "ASN", 'A', true));
      attrs = fmt::format(", mode {}", call.mode);
      const Batched& u = call.results[2];
      const Batched& vt = call.results[3];
      const int64_t k = std::min(m, n);
      const int64_t u_cols = call.mode == 'A' ? m : k, vt_rows = call.mode == 'A' ? n : k;
      if (call.mode != 'N') {
        shapes_fit &= u.rows == m && u.cols == u_cols && vt.rows == vt_rows && vt.cols == n;
      }
      break;
    }
    case Routine::kGeev: {
      ASSIGN_OR_RETURN(call.left, attribute("compute_left", "VN", 'N', true));
      ASSIGN_OR_RETURN(call.right, attribute("compute_right", "VN", 'N', true));
      attrs = fmt::format(", left {}, right {}", call.left, call.right);
      break;
    }
    case Routine::kTrsm: {
      ASSIGN_OR_RETURN(call.side, attribute("side", "LR", 'L', true));
      ASSIGN_OR_RETURN(call.uplo, attribute("uplo", "LU", 'L', true));
      ASSIGN_OR_RETURN(call.trans, attribute("trans_x", "NTC", 'N', true));
      ASSIGN_OR_RETURN(call.diag, attribute("diag", "NU", 'N', true));
      attrs = fmt::format(", side {}, uplo {}, trans {}, diag {}", call.side, call.uplo,
                          call.trans, call.diag);
      const Batched& rhs = call.operands[1];
      shapes_fit &= m == n && (call.side == 'L' ? rhs.rows : rhs.cols) == m;
      break;
    }
    default:
      break;
  }
  if (!shapes_fit) {
    return fail(fmt::format("the shapes {} -> {} do not fit {}", x.ToString(false),
                            hlo.shape().ToString(false), r));
  }
  std::unique_ptr<LapackThunk> thunk(new LapackThunk(std::move(hlo_name)));
  thunk->routine_ = r;
  thunk->description_ = fmt::format("{}{}{}, {} x {}[{},{}]", parsed->type, r, attrs,
                                    call.operands[0].offsets.size(), PrimitiveTypeName(t), m, n);
  switch (parsed->type) {
    case 's': thunk->impl_ = std::make_unique<LapackRunner<float>>(std::move(call)); break;
    case 'd': thunk->impl_ = std::make_unique<LapackRunner<double>>(std::move(call)); break;
    case 'c': thunk->impl_ = std::make_unique<LapackRunner<lapack_cf>>(std::move(call)); break;
    default: thunk->impl_ = std::make_unique<LapackRunner<lapack_cd>>(std::move(call)); break;
  }
  for (int64_t slot : operand_slots) {
    if (slot < 0) return fail("an operand has no buffer");
  }
  // A result nothing reads may have no buffer; it is written to scratch.
  for (const Shape& shape : result_shapes) {
    thunk->result_bytes_.push_back(shape_util::ByteSizeOf(shape));
  }
  thunk->operand_slots_ = std::move(operand_slots);
  thunk->result_slots_ = std::move(result_slots);
  return thunk;
}

Status LapackThunk::Execute(char** frame, ExecuteContext&) const {
  std::vector<const char*> operands;
  std::vector<char*> results;
  for (int64_t slot : operand_slots_) operands.push_back(frame[slot]);
  std::vector<std::vector<char>> scratch;
  for (size_t i = 0; i < result_slots_.size(); ++i) {
    if (result_slots_[i] >= 0) {
      results.push_back(frame[result_slots_[i]]);
    } else {
      scratch.emplace_back(result_bytes_[i]);
      results.push_back(scratch.back().data());
    }
  }
  impl_->Run(operands, results);
  return OkStatus();
}

std::string LapackThunk::ToString(int indent) const {
  return fmt::format("{:{}}lapack {} ({}, LAPACK)\n", "", indent, hlo_name(), description_);
}

}  // namespace xlens::runtime
