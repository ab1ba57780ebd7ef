// NCCL for the GPU backend's collectives between real GPUs of one process, opened with dlopen as
// cuBLAS is (no link-time dependency: the entry points are declared here as <nccl.h> declares
// them). Each device is one GPU and one NCCL rank; every group of devices that meets gets its own
// communicator (ncclCommInitAll over the group's GPUs), and each device issues its calls on its
// own stream (the null stream of its CUDA context, where its kernels run).
//
// What NCCL takes (NcclPlan): all-reduce and all-reduce-start whose to_apply is an add, multiply,
// maximum or minimum (and/or of pred) of a type NCCL reduces (ncclAllReduce); all-gather and
// reduce-scatter along the dimension that is major in memory (ncclAllGather, ncclReduceScatter:
// NCCL concatenates whole buffers by rank); all-to-all (its pieces as grouped ncclSend/ncclRecv)
// and collective-permute (ncclSend/ncclRecv of the pairs, zeros where no pair targets a device);
// collective-broadcast (ncclBroadcast from the group's first member). The rest (other layouts,
// other reductions, the other -start forms and every -done) runs through the host between the
// devices of the process, with the evaluator's semantics (gpu_collectives.h).
//
// NCCL puts one rank on each GPU: a communicator naming one GPU twice is refused ("Duplicate GPU
// detected"), so R x P devices need R x P GPUs; --backend=gpu-sim runs any number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/hlo/primitive_type.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// ncclDataType_t and ncclRedOp_t, with <nccl.h>'s values.
enum class NcclType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
enum class NcclOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

using NcclComm = void*;    // ncclComm_t
using CudaStream = void*;  // cudaStream_t; nullptr: the current context's null stream
struct NcclUniqueId {
  char internal[128];
};

// libnccl's entry points, resolved. ncclResult_t is an int (0: ncclSuccess).
struct NcclLibrary {
  std::string path;  // what dlopen loaded
  void* handle = nullptr;
  int version = 0;   // ncclGetVersion's: 22304 for 2.23.4
  int (*ncclGetVersion)(int* version) = nullptr;
  const char* (*ncclGetErrorString)(int result) = nullptr;
  int (*ncclCommInitAll)(NcclComm* comms, int ndev, const int* devlist) = nullptr;
  int (*ncclCommDestroy)(NcclComm comm) = nullptr;
  int (*ncclGroupStart)() = nullptr;
  int (*ncclGroupEnd)() = nullptr;
  int (*ncclAllReduce)(const void* send, void* recv, size_t count, int type, int op, NcclComm comm,
                       CudaStream stream) = nullptr;
  int (*ncclAllGather)(const void* send, void* recv, size_t send_count, int type, NcclComm comm,
                       CudaStream stream) = nullptr;
  int (*ncclReduceScatter)(const void* send, void* recv, size_t recv_count, int type, int op,
                           NcclComm comm, CudaStream stream) = nullptr;
  int (*ncclBroadcast)(const void* send, void* recv, size_t count, int type, int root, NcclComm comm,
                       CudaStream stream) = nullptr;
  int (*ncclSend)(const void* send, size_t count, int type, int peer, NcclComm comm,
                  CudaStream stream) = nullptr;
  int (*ncclRecv)(void* recv, size_t count, int type, int peer, NcclComm comm,
                  CudaStream stream) = nullptr;
};

// The libnccl names tried in order: $NCCL_HOME/lib, $CUDA_HOME/lib64, /usr/local/cuda/lib64,
// then the loader's search path, each as libnccl.so.2 and libnccl.so.
std::vector<std::string> NcclCandidates();

// Loads the first of `candidates` that dlopen opens and resolves every entry point. Without one:
// "no NCCL found (tried ...; last: ...): collectives between GPUs need it: install libnccl2 ..."
// (one line). Not cached (tests pass their own lists).
StatusOr<NcclLibrary> LoadNcclFrom(const std::vector<std::string>& candidates);

// LoadNcclFrom(NcclCandidates()), once per process.
StatusOr<const NcclLibrary*> LoadNccl();

// "NCCL call ncclAllReduce failed: <ncclGetErrorString> (NCCL error 5)", or OK for 0.
Status CheckNccl(const NcclLibrary& library, int result, const char* call);

// The NCCL type that carries `type` element for element (for reductions), or nullopt.
std::optional<NcclType> NcclTypeOf(PrimitiveType type);

// The NCCL reduction of `to_apply` (a root of add, multiply, maximum or minimum of its two
// parameters; and/or over pred as min/max) for elements of `type`, or nullopt.
std::optional<NcclOp> NcclOpOf(const HloComputation* to_apply, PrimitiveType type);

// How one collective runs through NCCL.
struct NcclPlan {
  enum class Kind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kPermute, kBroadcast };
  Kind kind = Kind::kAllReduce;
  NcclType type = NcclType::kUint8;  // kUint8 with counts in bytes where only bytes move
  NcclOp op = NcclOp::kSum;
  // Elements (of `type`) of each operand leaf on this device.
  std::vector<int64_t> counts;
};

// The NCCL calls for `hlo`, or why it runs through the host instead ("all-gather along
// dimension 1, not the major one", "to_apply is not one NCCL reduces", ...).
StatusOr<NcclPlan> PlanNcclCollective(const HloInstruction& hlo);

}  // namespace xlens::runtime
