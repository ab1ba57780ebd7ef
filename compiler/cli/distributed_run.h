// `mpirun -np N xlens run|eval MODULE --num_partitions=P --distributed=mpi`: the module's
// devices (replicas x partitions) spread over mpirun's processes, each rank a contiguous block
// of device ids (DevicesOfRank), its collectives crossing ranks as MPI calls
// (distributed_rendezvous.h over runtime/mpi_transport.h).
#pragma once

#include "compiler/cli/commands.h"

namespace xlens::cli {

// As RunOnDevices (multi_device_run.h) with args.distributed set, on this rank's devices. Each
// rank reads only its devices' inputs (device_D/ folders, or the global arrays' pieces), writes
// only their outputs under --outputs DIR/device_D/ (rank 0 writes the global DIR/outI.npy,
// assembled from every rank's devices as one process assembles them), and prints one line per
// failure, prefixed "rank R of N", the same verdict on every rank; rank 0 prints the run's
// summary line.
int RunDistributed(const RunArgs& args, bool compiled);

}  // namespace xlens::cli
