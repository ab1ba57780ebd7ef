// libxlens_mpi.so: mpi_plugin.h's calls over Open MPI. The calls are MPI's blocking collectives
// (and point-to-point transfers waited for at once with MPI_Waitall),
// which run at MPI's speed (a nonblocking one polled with MPI_Test progresses only as often as it
// is polled: a 1 MB MPI_Iallreduce between two busy ranks took 30x longer). Their time limit is
// kept by a watchdog thread: a call still running past it prints the line the caller set and
// exits, and mpirun ends every other rank. Errors return (MPI_ERRORS_RETURN) and are turned into text.
#include "compiler/mpi/mpi_plugin.h"

#include <mpi.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

MPI_Comm g_comm = MPI_COMM_NULL;
// The communicators by handle: 0 is g_comm, split() adds the others (freed by finalize).
std::vector<MPI_Comm> g_comms;

MPI_Comm CommOf(int comm) {
  if (comm < 0 || comm >= static_cast<int>(g_comms.size())) return MPI_COMM_NULL;
  return g_comms[comm];
}

void SetError(char* error, size_t error_size, const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (code != MPI_SUCCESS) MPI_Error_string(code, text, &length);
  std::snprintf(error, error_size, "%s failed: %s", what, length > 0 ? text : "MPI error");
}

// The watchdog: the deadline of the call in flight (steady-clock ns; 0: none) and the line to
// print when it passes.
std::atomic<int64_t> g_deadline_ns{0};
std::mutex g_line_mutex;
std::string g_timeout_line = "xlens: an MPI collective overran its time limit; stopping every rank\n";

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Watch() {
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t deadline = g_deadline_ns.load();
    if (deadline == 0 || NowNs() < deadline) continue;
    {
      std::lock_guard<std::mutex> lock(g_line_mutex);
      const ssize_t written = write(STDERR_FILENO, g_timeout_line.data(), g_timeout_line.size());
      (void)written;
    }
    // Not MPI_Abort: MPI may not be called from a second thread while the first is inside it.
    // A rank that exits without MPI_Finalize makes mpirun stop the others, as MPI_Abort would.
    _exit(1);
  }
}

// Arms the watchdog for one blocking call.
class Deadline {
 public:
  explicit Deadline(double timeout_seconds) {
    if (timeout_seconds > 0) {
      g_deadline_ns.store(NowNs() + static_cast<int64_t>(timeout_seconds * 1e9));
    }
  }
  ~Deadline() { g_deadline_ns.store(0); }
};

MPI_Datatype TypeOf(int type) {
  switch (type) {
    case kXlensMpiF32: return MPI_FLOAT;
    case kXlensMpiF64: return MPI_DOUBLE;
    case kXlensMpiS8: return MPI_INT8_T;
    case kXlensMpiS16: return MPI_INT16_T;
    case kXlensMpiS32: return MPI_INT32_T;
    case kXlensMpiS64: return MPI_INT64_T;
    case kXlensMpiU8: return MPI_UINT8_T;
    case kXlensMpiU16: return MPI_UINT16_T;
    case kXlensMpiU32: return MPI_UINT32_T;
    case kXlensMpiU64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

size_t SizeOf(int type) {
  switch (type) {
    case kXlensMpiF32: case kXlensMpiS32: case kXlensMpiU32: return 4;
    case kXlensMpiF64: case kXlensMpiS64: case kXlensMpiU64: return 8;
    case kXlensMpiS16: case kXlensMpiU16: return 2;
    default: return 1;
  }
}

MPI_Op OpOf(int op) {
  switch (op) {
    case kXlensMpiSum: return MPI_SUM;
    case kXlensMpiProd: return MPI_PROD;
    case kXlensMpiMax: return MPI_MAX;
    case kXlensMpiMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

int Init(int* rank, int* size, char* error, size_t error_size) {
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    SetError(error, error_size, "MPI_Init_thread", rc);
    return kXlensMpiError;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    std::snprintf(error, error_size, "this MPI runs calls from one thread only "
                  "(MPI_THREAD_SERIALIZED was asked for)");
    return kXlensMpiError;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(g_comm, rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(g_comm, size);
  if (rc != MPI_SUCCESS) {
    SetError(error, error_size, "setting up MPI_COMM_WORLD", rc);
    return kXlensMpiError;
  }
  g_comms.assign(1, g_comm);
  std::thread(Watch).detach();
  return kXlensMpiOk;
}

bool TooLarge(int64_t count, const char* what, char* error, size_t error_size) {
  if (count <= INT_MAX) return false;
  std::snprintf(error, error_size, "%s of %lld elements: MPI counts stop at 2^31", what,
                static_cast<long long>(count));
  return true;
}

int BadComm(int comm, char* error, size_t error_size) {
  std::snprintf(error, error_size, "no communicator %d", comm);
  return kXlensMpiError;
}

// The result of MPI call `what`: kXlensMpiOk, or its error as text.
int Result(int rc, const char* what, char* error, size_t error_size) {
  if (rc == MPI_SUCCESS) return kXlensMpiOk;
  SetError(error, error_size, what, rc);
  return kXlensMpiError;
}

// MPI's type and operation for a reduction of `type` by `op`; false (the error set) when MPI has
// none.
bool ReductionOf(int type, int op, MPI_Datatype* datatype, MPI_Op* mpi_op, char* error,
                 size_t error_size) {
  *datatype = TypeOf(type);
  *mpi_op = OpOf(op);
  if (*datatype != MPI_DATATYPE_NULL && *mpi_op != MPI_OP_NULL) return true;
  std::snprintf(error, error_size, "no MPI reduction for type %d, op %d", type, op);
  return false;
}

// MPI_Allgather and MPI_Alltoall: `bytes_each` bytes from and to every member of `comm`.
using EqualBlocksCall = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
int EqualBlocks(EqualBlocksCall call, const char* what, int comm, const void* mine,
                int64_t bytes_each, void* out, double timeout, char* error, size_t error_size) {
  const MPI_Comm c = CommOf(comm);
  if (c == MPI_COMM_NULL) return BadComm(comm, error, error_size);
  if (TooLarge(bytes_each, what, error, error_size)) return kXlensMpiError;
  Deadline deadline(timeout);
  return Result(call(mine, static_cast<int>(bytes_each), MPI_BYTE, out, static_cast<int>(bytes_each),
                     MPI_BYTE, c),
                what, error, error_size);
}

int Allgather(int comm, const void* mine, int64_t bytes_each, void* out, double timeout,
              char* error, size_t error_size) {
  return EqualBlocks(MPI_Allgather, "MPI_Allgather", comm, mine, bytes_each, out, timeout, error,
                     error_size);
}

int Alltoall(int comm, const void* mine, int64_t bytes_each, void* out, double timeout, char* error,
             size_t error_size) {
  return EqualBlocks(MPI_Alltoall, "MPI_Alltoall", comm, mine, bytes_each, out, timeout, error,
                     error_size);
}

int ReduceScatter(int comm, const void* in, void* out, int64_t count_each, int type, int op,
                  double timeout, char* error, size_t error_size) {
  const MPI_Comm c = CommOf(comm);
  if (c == MPI_COMM_NULL) return BadComm(comm, error, error_size);
  MPI_Datatype datatype;
  MPI_Op mpi_op;
  if (!ReductionOf(type, op, &datatype, &mpi_op, error, error_size)) return kXlensMpiError;
  if (TooLarge(count_each, "MPI_Reduce_scatter_block", error, error_size)) return kXlensMpiError;
  Deadline deadline(timeout);
  return Result(
      MPI_Reduce_scatter_block(in, out, static_cast<int>(count_each), datatype, mpi_op, c),
      "MPI_Reduce_scatter_block", error, error_size);
}

int Split(int color, int key, int* comm, double timeout, char* error, size_t error_size) {
  MPI_Comm split = MPI_COMM_NULL;
  Deadline deadline(timeout);
  int rc = MPI_Comm_split(g_comm, color, key, &split);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    SetError(error, error_size, "MPI_Comm_split", rc);
    return kXlensMpiError;
  }
  g_comms.push_back(split);
  *comm = static_cast<int>(g_comms.size()) - 1;
  return kXlensMpiOk;
}

int Exchange(const XlensMpiTransfer* sends, int send_count, const XlensMpiTransfer* receives,
             int receive_count, double timeout, char* error, size_t error_size) {
  std::vector<MPI_Request> requests;
  requests.reserve(static_cast<size_t>(send_count + receive_count));
  Deadline deadline(timeout);
  int rc = MPI_SUCCESS;
  for (int i = 0; i < receive_count && rc == MPI_SUCCESS; ++i) {
    if (TooLarge(receives[i].bytes, "MPI_Irecv", error, error_size)) rc = MPI_ERR_COUNT;
    if (rc != MPI_SUCCESS) break;
    requests.emplace_back();
    rc = MPI_Irecv(receives[i].data, static_cast<int>(receives[i].bytes), MPI_BYTE,
                   receives[i].peer, receives[i].tag, g_comm, &requests.back());
  }
  for (int i = 0; i < send_count && rc == MPI_SUCCESS; ++i) {
    if (TooLarge(sends[i].bytes, "MPI_Isend", error, error_size)) rc = MPI_ERR_COUNT;
    if (rc != MPI_SUCCESS) break;
    requests.emplace_back();
    rc = MPI_Isend(sends[i].data, static_cast<int>(sends[i].bytes), MPI_BYTE, sends[i].peer,
                   sends[i].tag, g_comm, &requests.back());
  }
  if (rc == MPI_SUCCESS && !requests.empty()) {
    rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  }
  if (rc != MPI_SUCCESS) {
    if (error[0] == '\0') SetError(error, error_size, "MPI_Isend/MPI_Irecv", rc);
    return kXlensMpiError;
  }
  return kXlensMpiOk;
}

int Allgatherv(const void* mine, int64_t bytes, const int64_t* sizes, void* out, double timeout,
               char* error, size_t error_size) {
  int ranks = 0;
  MPI_Comm_size(g_comm, &ranks);
  std::vector<int> counts(ranks), displacements(ranks);
  int64_t offset = 0;
  for (int r = 0; r < ranks; ++r) {
    if (sizes[r] > INT_MAX || offset > INT_MAX) {
      std::snprintf(error, error_size, "one exchange holds more than 2 GiB (rank %d brings %lld "
                    "bytes)", r, static_cast<long long>(sizes[r]));
      return kXlensMpiError;
    }
    counts[r] = static_cast<int>(sizes[r]);
    displacements[r] = static_cast<int>(offset);
    offset += sizes[r];
  }
  Deadline deadline(timeout);
  return Result(MPI_Allgatherv(mine, static_cast<int>(bytes), MPI_BYTE, out, counts.data(),
                               displacements.data(), MPI_BYTE, g_comm),
                "MPI_Allgatherv", error, error_size);
}

int Allreduce(int comm, void* data, int64_t count, int type, int op, double timeout, char* error,
              size_t error_size) {
  const MPI_Comm c = CommOf(comm);
  if (c == MPI_COMM_NULL) return BadComm(comm, error, error_size);
  MPI_Datatype datatype;
  MPI_Op mpi_op;
  if (!ReductionOf(type, op, &datatype, &mpi_op, error, error_size)) return kXlensMpiError;
  // MPI counts are ints: larger arrays go in pieces.
  constexpr int64_t kPiece = int64_t{1} << 28;
  char* bytes = static_cast<char*>(data);
  for (int64_t done = 0; done < count; done += kPiece) {
    const int n = static_cast<int>(count - done < kPiece ? count - done : kPiece);
    Deadline deadline(timeout);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, bytes + done * SizeOf(type), n, datatype, mpi_op, c);
    if (Result(rc, "MPI_Allreduce", error, error_size) != kXlensMpiOk) return kXlensMpiError;
  }
  return kXlensMpiOk;
}

void Abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void Finalize() {
  for (size_t i = 1; i < g_comms.size(); ++i) {
    if (g_comms[i] != MPI_COMM_NULL) MPI_Comm_free(&g_comms[i]);
  }
  g_comms.clear();
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  MPI_Finalize();
}

void SetTimeoutLine(const char* line) {
  std::lock_guard<std::mutex> lock(g_line_mutex);
  g_timeout_line = line;
}

const XlensMpiApi kApi = {kXlensMpiAbiVersion, Init,  Allgather, Alltoall, Allgatherv,
                          Allreduce,           ReduceScatter, Split,  Exchange, Abort,
                          Finalize,            SetTimeoutLine};

}  // namespace

extern "C" __attribute__((visibility("default"))) const XlensMpiApi* xlens_mpi_api(void) {
  return &kApi;
}
