// Which devices waited for which: the collective spans of a trace of several devices (category
// "collective", as compiler/runtime/collective_thunk.h records them) joined into meetings. Each
// span says its device, its group ("0,1,2,3") and when it arrived (arrived_ns after its start);
// the k-th span of an instruction and group on one device meets the k-th of the same on every
// other member (every member runs a collective as often as the others, or the run fails). Each
// span of a complete meeting gets
//
//   group        the members' ids, as a list
//   wait_ns      from its arrival to the last member's: what it spent waiting for the others
//   last_arrival the member that came last
//   waited_for   "device N" (that member), "" on the last member itself
//
// and flows join the members' spans in the order they arrived, each from one member's arrival to
// the next one's (TraceEvent::flow_out_at_ns, flow_in_at_ns), so the arrows run forward in time
// and end on the device the others waited for (a flow joins two spans: a chain draws one arrow
// between neighbours where a star from one member would pile them up).
//
// It reads nothing but the spans, so the traces of several processes (one per MPI rank) link the
// same once merged into one trace on one clock.
#pragma once

#include <cstdint>

#include "profiler/trace.h"

namespace xlens::profiler {

// Flow ids of collectives start here, far above CUPTI's correlation ids (launch -> kernel).
inline constexpr int64_t kCollectiveFlowIdBase = int64_t{1} << 40;

struct CollectiveLinks {
  int64_t spans = 0;       // collective spans of meetings of several devices
  int64_t meetings = 0;    // complete meetings
  int64_t flows = 0;       // flows added (one fewer than the members of each meeting)
  int64_t incomplete = 0;  // spans whose meeting lacks members (a failed run's last collective)
};

CollectiveLinks LinkCollectives(Trace& trace);

}  // namespace xlens::profiler
