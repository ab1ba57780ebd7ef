// `xlens run --distributed=mpi --trace FILE`: one trace of every rank's devices. Each rank records
// its own (its devices a process each, as multi_device_trace.h places them, its host as "Host
// (CPU), rank R"); after the run the ranks' traces go to rank 0 in one all-gather, which puts
// them on rank 0's clock, joins the collectives' meetings across ranks
// (profiler/collective_timeline.h: waits, and flows between devices of different ranks) and
// writes the file once.
//
// Clocks: ranks on rank 0's host share its steady clock and are taken as they are; a rank on
// another host is shifted by the difference of the clocks read just after a barrier (good to the
// barrier's latency, microseconds on one network).
#pragma once

#include <string>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/collective_transport.h"
#include "compiler/support/status.h"

namespace xlens::cli {

// Host processes of ranks: pid kRankHostPidBase + rank (below the devices' 1000 + id).
inline constexpr int32_t kRankHostPidBase = 500;

class DistributedTrace {
 public:
  explicit DistributedTrace(std::string path) : path_(std::move(path)) {}
  // Starts recording on this rank (nothing when the path is empty).
  Status Start();
  // On every rank after a run every rank completed: gathers the ranks' traces and, on rank 0,
  // writes the merged trace and appends the per-device wait lines to `report`. Every rank must
  // call it (it meets the others); nothing when not recording.
  Status Finish(CollectiveTransport& transport, const DeviceTopology& topology, double timeout_seconds,
                std::string& report);

 private:
  std::string path_;
  bool recording_ = false;
};

}  // namespace xlens::cli
