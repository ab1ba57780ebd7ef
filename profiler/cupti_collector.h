// The CUPTI collector: GPU activity (kernels, copies, memsets, synchronizations) and the CUDA API
// calls that caused it, recorded by NVIDIA's CUPTI activity API while a trace runs, as XLA's and
// Kineto's CUPTI tracers do.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CuptiCollector> cupti, CuptiCollector::Start({}));
//   ... run; the runtime brackets each launch with Push/PopExternalCorrelation(thunk id) ...
//   Trace gpu = cupti->Stop();
//   host_trace.Append(std::move(gpu));
//   LinkExternalIds(host_trace);
//
// libcupti is opened with dlopen, so the profiler runs (without GPU activity) where there is
// no toolkit, no driver or no GPU; Start then says why in one message, and the caller prints it
// as one warning and goes on without a GPU part.
//
// The part that needs CUPTI is small: loading the library, enabling activity kinds, handing it
// buffers and copying its records into the plain structs of cupti_records.h. Turning those
// records into a Trace (tracks, flows, clock mapping, counters) is ConvertCuptiRecords there, a
// pure function that the tests drive with synthetic records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/support/status.h"
#include "profiler/cupti_records.h"
#include "profiler/trace.h"

namespace xlens::profiler {

// --- The collector. ------------------------------------------------------------------------------

struct CuptiOptions {
  // A libcupti to open instead of searching the usual names and toolkit directories.
  std::string library_path;
  // CUPTI writes records into a fixed pool of buffers allocated by Start; when all are full
  // and not yet handed back, it drops records (counted in "dropped_records").
  size_t buffer_bytes = size_t{4} << 20;
  size_t buffer_count = 16;
};

class CuptiCollector {
 public:
  // Loads libcupti, checks its version, makes sure no other CUPTI client (Nsight) is attached
  // and enables the activity kinds. Fails with one message saying why (no library, too old,
  // no driver or GPU, not permitted, another profiler attached), with nothing left enabled.
  // One collector at a time per process.
  static StatusOr<std::unique_ptr<CuptiCollector>> Start(const CuptiOptions& options = {});
  // Stops collecting if Stop was not called.
  ~CuptiCollector();
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Attributes the CUDA calls this thread makes until the matching Pop (and the GPU work they
  // launch) to `id`; they nest. Cheap enough to call around every launch.
  void PushExternalCorrelation(uint64_t id);
  void PopExternalCorrelation();

  // Flushes CUPTI's buffers, disables collection and returns the GPU part of the trace
  // (ConvertCuptiRecords). A failure to flush is recorded in the metadata as "cupti_error".
  // Later calls return an empty trace. Must not run while other threads still push or pop.
  Trace Stop();

 private:
  struct Session;  // what Start set up; defined where CUPTI's headers are
  explicit CuptiCollector(std::unique_ptr<Session> session);
  std::unique_ptr<Session> session_;
};

// Pushes an external correlation id for the scope; does nothing with no collector.
class ScopedExternalCorrelation {
 public:
  ScopedExternalCorrelation(CuptiCollector* collector, uint64_t id) : collector_(collector) {
    if (collector_ != nullptr) collector_->PushExternalCorrelation(id);
  }
  ~ScopedExternalCorrelation() {
    if (collector_ != nullptr) collector_->PopExternalCorrelation();
  }
  ScopedExternalCorrelation(const ScopedExternalCorrelation&) = delete;
  ScopedExternalCorrelation& operator=(const ScopedExternalCorrelation&) = delete;

 private:
  CuptiCollector* collector_;
};

}  // namespace xlens::profiler
