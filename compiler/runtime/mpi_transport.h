// The CollectiveTransport (hlo/collective_transport.h) of xlens run --distributed=mpi: Open MPI's
// typed collectives on the buffers (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
// MPI_Alltoall on
// communicators from MPI_Comm_split, MPI_Isend/MPI_Irecv) through libxlens_mpi.so (mpi/mpi_plugin.h), which is opened with dlopen here, only
// when asked for, so that the xlens binary starts without libmpi on machines that lack it.
#pragma once

#include <memory>
#include <string>

#include "compiler/hlo/collective_transport.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

class MpiTransport : public CollectiveTransport {
 public:
  // Opens libxlens_mpi.so (beside the executable, or $XLENS_MPI_LIBRARY) and initialises MPI.
  // Errors in one line: the library or MPI is missing, or MPI_Init failed.
  static StatusOr<std::unique_ptr<MpiTransport>> Create();
  ~MpiTransport() override;

  int rank() const override { return rank_; }
  int num_ranks() const override { return size_; }
  std::vector<std::string> AllGather(std::string_view mine, std::string_view what,
                                     double timeout_seconds) override;
  int Split(int color, int key, std::string_view what, double timeout_seconds) override;
  bool CanReduce(PrimitiveType type) const override;
  void AllReduce(int communicator, void* data, int64_t count, PrimitiveType type,
                 TransportReduction op, std::string_view what, double timeout_seconds) override;
  void ReduceScatter(int communicator, const void* in, void* out, int64_t count_each,
                     PrimitiveType type, TransportReduction op, std::string_view what,
                     double timeout_seconds) override;
  void AllGatherBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                      std::string_view what, double timeout_seconds) override;
  void AllToAllBytes(int communicator, const void* in, void* out, int64_t bytes_each,
                     std::string_view what, double timeout_seconds) override;
  void Exchange(std::span<const TransportSend> sends, std::span<const TransportReceive> receives,
                std::string_view what, double timeout_seconds) override;

  // "rank 1 of 4", the prefix of every line a rank prints about the run.
  std::string RankName() const;
  // Prints "xlens: rank R of N: MESSAGE; stopping every rank" and ends every rank (MPI_Abort).
  [[noreturn]] void AbortAll(std::string_view message);
  // This rank is about to print how its run ended: from now on mpirun stopping it (another rank
  // exited first) adds no "stopped by mpirun" line.
  void VerdictGiven();
  // MPI_Finalize; call once every rank has made its last exchange.
  void Finalize();

 private:
  MpiTransport() = default;
  // What the plugin's watchdog prints if the next call overruns `timeout_seconds`.
  void SetTimeoutLine(std::string_view what, double timeout_seconds);
  struct Api;
  const Api* api_ = nullptr;
  void* handle_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  bool finalized_ = false;
};

}  // namespace xlens::runtime
