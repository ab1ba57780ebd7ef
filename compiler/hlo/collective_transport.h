// How the processes of a run spread over several processes (xlens run --distributed=mpi) reach
// each other: whole-run collective calls over every process, in the same order on every one, each
// with a time limit. DistributedRendezvous builds the devices' meetings on it; the MPI transport
// (runtime/mpi_transport.h) implements it with MPI calls. Kept to bytes so that nothing here
// depends on MPI, and tests can stand a fake in for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/shape.h"
#include "compiler/support/status.h"

namespace xlens {

// The reductions a transport may do itself (MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN).
enum class TransportReduction { kSum, kProduct, kMax, kMin };

class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;
  // This process's rank and the number of processes.
  virtual int rank() const = 0;
  virtual int num_ranks() const = 0;
  // Every process brings `mine`; returns every process's bytes in rank order. `what` names the
  // step for messages. A process that does not come within `timeout_seconds` (0: no limit), or a
  // failed call, ends every process with one line naming `what`: the processes can no longer
  // agree on anything, so this never returns an error to carry on with.
  virtual std::vector<std::string> AllGather(std::string_view mine, std::string_view what,
                                             double timeout_seconds) = 0;
  // Whether AllReduce takes `type`.
  virtual bool CanReduce(PrimitiveType type) const = 0;
  // Reduces `count` elements of `type` at `data` elementwise over every process, in place; fails
  // as AllGather does.
  virtual void AllReduce(void* data, int64_t count, PrimitiveType type, TransportReduction op,
                         std::string_view what, double timeout_seconds) = 0;
};

}  // namespace xlens
