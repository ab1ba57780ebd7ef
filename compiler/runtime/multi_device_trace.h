// The timeline of a run on several simulated devices (multi_device_executable.h): a process per
// device, "CPU device 3 (replica 1, partition 1)", holding that device's spans (its executable's
// run, kernels and thunks, as a single device records them), its collectives among them
// (collective_thunk.h; profiler/collective_timeline.h joins their meetings: waits and flows).
//
// The device threads are named (DeviceThreadName) while a trace is recorded, and their spans
// moved to the device's process afterwards. The pid is kCpuDevicePidBase + the global device id,
// so under MPI each process's trace holds its own devices, and the processes' traces merge into
// one without clashing.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/hlo/collective_attributes.h"
#include "profiler/trace.h"

namespace xlens::runtime {

// The name a device's thread takes while a trace is recorded ("device 3").
std::string DeviceThreadName(int64_t device);

// "CPU device 3 (replica 1, partition 1)".
std::string DeviceProcessName(const DeviceTopology& topology, int64_t device);

// Moves the spans of every thread named DeviceThreadName(d) (d one of the topology's devices) to
// device d's process, on one track whatever thread each run used; the other threads' spans
// (compilation, the main thread) stay on the host. Returns the devices placed.
int64_t PlaceDevicesOnTimeline(profiler::Trace& trace, const DeviceTopology& topology);

}  // namespace xlens::runtime
