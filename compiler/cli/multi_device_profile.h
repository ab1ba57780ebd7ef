// What `xlens run --num_replicas --num_partitions` records beside its results: with --trace, the
// timeline of every device (multi_device_trace.h: a process per device, its collectives' bytes,
// groups and waits, flows joining the members of each meeting) and a line per device of its
// waiting; with --xla_hlo_profile, the per-HLO profile of each device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/runtime/multi_device_executable.h"
#include "compiler/support/watchdog.h"

namespace xlens::cli {

class DeviceRunProfile {
 public:
  DeviceRunProfile(const RunArgs& args, FlagsSetup& setup, DeviceTopology topology)
      : args_(args), setup_(setup), topology_(topology) {}

  // Starts recording the trace when --trace is given (before compiling, so the compilations are
  // on the host's track).
  Status Start(Watchdog& watchdog);
  // Before each run: `timed` runs add into the per-HLO profile.
  void Prepare(bool timed);
  // Each device's thunk times, for MultiDeviceExecutable::Execute; nullptr when not profiling
  // or not `timed`.
  std::vector<std::vector<int64_t>>* thunk_ns(bool timed) {
    return timed && setup_.debug.xla_hlo_profile ? &thunk_ns_ : nullptr;
  }
  // After the runs: writes the trace and appends the per-device lines to `report` (the devices'
  // waits under --trace, their profiles under --xla_hlo_profile). A trace that cannot be written
  // is the error.
  Status Finish(const runtime::MultiDeviceExecutable& executable, const Watchdog& watchdog,
                std::string& report);
  // A failed run: the trace up to the failure is written and the error says where.
  Status Failed(Status failure, const Watchdog& watchdog);

 private:
  // Stops recording, places the devices on the timeline and writes it; the number of events.
  StatusOr<size_t> WriteTrace(const Watchdog& watchdog, std::string* report);

  const RunArgs& args_;
  FlagsSetup& setup_;
  DeviceTopology topology_;
  bool tracing_ = false;
  std::vector<std::vector<int64_t>> thunk_ns_;
  int timed_runs_ = 0;
};

}  // namespace xlens::cli
