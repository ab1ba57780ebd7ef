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
// Element types of the reductions.
enum XlensMpiType {
  kXlensMpiF32, kXlensMpiF64, kXlensMpiS8, kXlensMpiS16, kXlensMpiS32, kXlensMpiS64,
  kXlensMpiU8, kXlensMpiU16, kXlensMpiU32, kXlensMpiU64,
};
enum XlensMpiOp { kXlensMpiSum, kXlensMpiProd, kXlensMpiMax, kXlensMpiMin };

inline constexpr int kXlensMpiAbiVersion = 4;

// One point-to-point transfer of exchange: `bytes` at `data` to (from) rank `peer`, by `tag`.
struct XlensMpiTransfer {
  void* data;
  int64_t bytes;
  int peer;
  int tag;
};

// `comm` is a communicator handle: 0 is every rank's (a private duplicate of MPI_COMM_WORLD),
// split() makes the others.
struct XlensMpiApi {
  int abi_version;
  // MPI_Init_thread (MPI_THREAD_SERIALIZED: one call at a time, from any thread) on a private
  // duplicate of MPI_COMM_WORLD whose errors return instead of aborting.
  int (*init)(int* rank, int* size, char* error, size_t error_size);
  // MPI_Allgather of `bytes_each` bytes from every rank of `comm`, in its rank order, into `out`.
  int (*allgather)(int comm, const void* mine, int64_t bytes_each, void* out,
                   double timeout_seconds, char* error, size_t error_size);
  // MPI_Alltoall over `comm`: block k of `bytes_each` bytes at `mine` to its rank k; `out` gets
  // every rank's block for this one, in its rank order.
  int (*alltoall)(int comm, const void* mine, int64_t bytes_each, void* out,
                  double timeout_seconds, char* error, size_t error_size);
  // Every rank's data, rank after rank, into `out` (each rank's size in sizes[0..size)).
  int (*allgatherv)(const void* mine, int64_t bytes, const int64_t* sizes, void* out,
                    double timeout_seconds, char* error, size_t error_size);
  // MPI_Allreduce in place over the ranks of `comm`.
  int (*allreduce)(int comm, void* data, int64_t count, int type, int op, double timeout_seconds,
                   char* error, size_t error_size);
  // MPI_Reduce_scatter_block over the ranks of `comm`: `count_each` elements to each.
  int (*reduce_scatter)(int comm, const void* in, void* out, int64_t count_each, int type, int op,
                        double timeout_seconds, char* error, size_t error_size);
  // MPI_Comm_split of every rank's communicator: the new handle into *comm.
  int (*split)(int color, int key, int* comm, double timeout_seconds, char* error,
               size_t error_size);
  // MPI_Isend and MPI_Irecv over every rank's communicator, then MPI_Waitall.
  int (*exchange)(const XlensMpiTransfer* sends, int send_count, const XlensMpiTransfer* receives,
                  int receive_count, double timeout_seconds, char* error, size_t error_size);
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
