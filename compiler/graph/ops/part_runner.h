// The parts of one library call (a oneDNN convolution split into blocks of rows, images or
// channels) run on the calling thread and on helper threads, such that a helper that another
// process' thread has taken the core from never holds the call back: once every part has been
// started, the caller computes again, itself, a part a helper is still on after about the time
// a part takes, and the first of the two to finish writes it. On a machine that other work keeps
// busy a step then waits for no descheduled thread (the barrier at the end of each parallel op
// was where the op-by-op executor's wall time doubled under load while its CPU time did not).
//
// A helper computes into its own scratch and copies its block into the output only if the
// caller has not taken the part over; so a helper still running a part the caller has finished
// writes nothing, but it reads the call's inputs until it ends: the job keeps alive (owns, or
// holds references to) everything its parts read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace xlens::graph {

class PartJob {
 public:
  virtual ~PartJob() = default;
  // Computes part t into its place in the output (the caller's way).
  virtual void RunInPlace(int64_t t) = 0;
  // The bytes part t needs to be computed beside the output.
  virtual size_t ScratchBytes(int64_t t) const = 0;
  // Computes part t into `scratch` (a helper's way), then Commit copies it to its place.
  virtual void RunInto(int64_t t, void* scratch) = 0;
  virtual void Commit(int64_t t, const void* scratch) = 0;
};

// What the calls of one kind (one plan of a convolution) took with helpers and on the caller
// alone (moving averages of the wall time, 0 until measured), by which each call picks the
// faster way, trying the other again every kProbeEvery calls: on a machine whose other core
// other work keeps busy, a helper shares a core with the caller or waits for one, and the
// caller alone is faster; on a quiet one the helpers are.
struct PartTimings {
  static constexpr int64_t kProbeEvery = 16;
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> helped_ns{0};
  std::atomic<int64_t> alone_ns{0};
};

// Runs parts [0, parts) of `job` on this thread and up to `helpers` helper threads; returns once
// every part has been written to the output, with the first error a part threw (empty: none).
// With `may_leave` false the caller waits for the helpers' parts instead of computing them
// again (a job that cannot keep its inputs alive). `timings` (may be null: always helped) are
// the call's kind's.
std::string RunPartsLeavingLateHelpers(const std::shared_ptr<PartJob>& job, int64_t parts,
                                       int helpers, bool may_leave, PartTimings* timings);

}  // namespace xlens::graph
