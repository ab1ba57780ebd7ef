// How the processes of a run spread over several processes (xlens run --distributed=mpi) reach
// each other: collective calls over every process (or over a communicator of some of them), in the
// same order on every one, each with a time limit. DistributedRendezvous builds the devices'
// meetings on it; the MPI transport (runtime/mpi_transport.h) implements it with MPI calls. Kept
// to bytes and element types so that nothing here depends on MPI, and tests can stand a fake in
// for it: only AllGather is required, the typed calls have plain implementations over it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/shape.h"
#include "compiler/support/status.h"

namespace xlens {

// The reductions a transport may do itself (MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN).
enum class TransportReduction { kSum, kProduct, kMax, kMin };

// One point-to-point transfer of an Exchange: `bytes` at `data` to (or from) process `peer`,
// matched by `tag` between the two.
struct TransportSend {
  const void* data = nullptr;
  int64_t bytes = 0;
  int peer = 0;
  int64_t tag = 0;
};
struct TransportReceive {
  void* data = nullptr;
  int64_t bytes = 0;
  int peer = 0;
  int64_t tag = 0;
};

class CollectiveTransport {
 public:
  // The communicator of every process.
  static constexpr int kEveryProcess = 0;

  virtual ~CollectiveTransport() = default;
  // This process's rank and the number of processes.
  virtual int rank() const = 0;
  virtual int num_ranks() const = 0;
  // Every process brings `mine`; returns every process's bytes in rank order. `what` names the
  // step for messages. A process that does not come within `timeout_seconds` (0: no limit), or a
  // failed call, ends every process with one line naming `what`: the processes can no longer
  // agree on anything, so neither this nor the calls below return an error to carry on with.
  virtual std::vector<std::string> AllGather(std::string_view mine, std::string_view what,
                                             double timeout_seconds) = 0;

  // The calls below are made by every process at once (each on its own communicator), as
  // AllGather is; the plain versions here exchange everything through AllGather, the MPI
  // transport's are MPI's typed calls on the buffers.

  // A communicator of the processes that bring the same `color`, ranked by `key`: its handle
  // (kEveryProcess is every process's). Every process calls it at once.
  virtual int Split(int color, int key, std::string_view what, double timeout_seconds);
  // Split's communicator for the set of groups named `set` (every process names it alike), made
  // the first time it is asked for and kept for every later run over this transport.
  int CommunicatorFor(const std::string& set, int color, int key, std::string_view what,
                      double timeout_seconds);
  // Whether the reductions below take `type`.
  virtual bool CanReduce(PrimitiveType type) const;
  // Reduces `count` elements of `type` at `data` elementwise over the communicator's processes,
  // in place.
  virtual void AllReduce(int communicator, void* data, int64_t count, PrimitiveType type,
                         TransportReduction op, std::string_view what, double timeout_seconds);
  // Reduces `count_each` x (communicator's size) elements at `in` elementwise over its processes;
  // process k of it receives the k-th block of `count_each` into `out`.
  virtual void ReduceScatter(int communicator, const void* in, void* out, int64_t count_each,
                             PrimitiveType type, TransportReduction op, std::string_view what,
                             double timeout_seconds);
  // Every process of the communicator brings `bytes_each` bytes at `in`; `out` receives them all
  // in its rank order.
  virtual void AllGatherBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                              std::string_view what, double timeout_seconds);
  // Every process of the communicator brings one block of `bytes_each` bytes for each of its
  // processes at `in`, in its rank order; `out` receives the block each process brought for this
  // one, in its rank order.
  virtual void AllToAllBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                             std::string_view what, double timeout_seconds);
  // Point-to-point transfers over every process, all of them at once: each send meets the
  // receive of its peer with its tag. Every process calls it (with no transfers, if it has none).
  virtual void Exchange(std::span<const TransportSend> sends,
                        std::span<const TransportReceive> receives, std::string_view what,
                        double timeout_seconds);

 protected:
  // The processes of each communicator made by the plain Split, by its rank order.
  std::vector<std::vector<int>> communicators_;
  // CommunicatorFor's, by set.
  std::map<std::string, int> kept_;
  const std::vector<int>& Members(int communicator);
};

}  // namespace xlens
