// The C interface of libxlens_mpi.so, the one part of xlens that links Open MPI's libmpi.
// xlens opens it with dlopen only under --distributed=mpi (runtime/mpi_transport.h), so the
// xlens binary neither needs libmpi.so to start nor pays for loading it (Open MPI's libraries and
// their components) on every run. Plain C types only: the library links none of xlens.
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

// Return codes of the calls below.
enum XlensMpiCode { kXlensMpiOk = 0, kXlensMpiError = 1, kXlensMpiTimeout = 2 };
// Element types of allreduce.
enum XlensMpiType {
  kXlensMpiF32, kXlensMpiF64, kXlensMpiS8, kXlensMpiS16, kXlensMpiS32, kXlensMpiS64,
  kXlensMpiU8, kXlensMpiU16, kXlensMpiU32, kXlensMpiU64,
};
enum XlensMpiOp { kXlensMpiSum, kXlensMpiProd, kXlensMpiMax, kXlensMpiMin };

inline constexpr int kXlensMpiAbiVersion = 2;

struct XlensMpiApi {
  int abi_version;
  // MPI_Init_thread (MPI_THREAD_SERIALIZED: one call at a time, from any thread) on a private
  // duplicate of MPI_COMM_WORLD whose errors return instead of aborting.
  int (*init)(int* rank, int* size, char* error, size_t error_size);
  // Every rank's `bytes` into sizes[0..size).
  int (*allgather_sizes)(int64_t bytes, int64_t* sizes, double timeout_seconds, char* error,
                         size_t error_size);
  // Every rank's data, rank after rank, into `out` (sizes from allgather_sizes).
  int (*allgatherv)(const void* mine, int64_t bytes, const int64_t* sizes, void* out,
                    double timeout_seconds, char* error, size_t error_size);
  // In place over every rank.
  int (*allreduce)(void* data, int64_t count, int type, int op, double timeout_seconds,
                   char* error, size_t error_size);
  // MPI_Abort of every rank; does not return.
  void (*abort)(int exit_code);
  // MPI_Finalize (after every rank's last call).
  void (*finalize)(void);
  // The line (with its newline) printed to stderr when the next calls overrun their time limit,
  // before this rank exits (and mpirun ends the others).
  void (*set_timeout_line)(const char* line);
};

// The table above; the one symbol xlens looks up.
const XlensMpiApi* xlens_mpi_api(void);
}
