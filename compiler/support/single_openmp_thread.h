// Holds the calling thread to one OpenMP thread for a scope and puts back the count it found.
// Header only: used where oneDNN is linked (the runtime's thunks, the graph's op kernels), which
// brings OpenMP with it in Debian's build.
#pragma once

#ifdef XLENS_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl_config.h>
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define XLENS_ONEDNN_ON_OPENMP 1
#endif
#endif

namespace xlens {

// oneDNN on OpenMP opens a team of the calling thread's OpenMP count at some calls (and sizes a
// primitive's loops by the count where it is made). The runtime's parallelism is its own pool,
// so every oneDNN call is made and run inside one of these: the call gets no OpenMP team thread
// to make or leave spinning (2-9 ms of CPU after each call measured where one was left), and the
// thread's count is the caller's again afterwards, as a host program (the Python package, an
// embedding application) that set it expects. Where the count is one already, nothing is set.
class SingleOpenMpThread {
 public:
#ifdef XLENS_ONEDNN_ON_OPENMP
  SingleOpenMpThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~SingleOpenMpThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
#else
  SingleOpenMpThread() = default;
#endif
  SingleOpenMpThread(const SingleOpenMpThread&) = delete;
  SingleOpenMpThread& operator=(const SingleOpenMpThread&) = delete;

#ifdef XLENS_ONEDNN_ON_OPENMP
 private:
  int saved_;
#endif
};

}  // namespace xlens
