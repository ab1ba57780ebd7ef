// Steal time: on a virtual machine, the time the hypervisor ran something else (another guest,
// its own work) while one of this guest's CPUs had work to run. Linux counts it per CPU in
// /proc/stat, beside user, system and idle time. A timing taken on a cloud VM varies with it
// from one minute to the next: measured on a 2-vCPU VM, three runs of 2000 iterations of the
// same module had medians of 0.68, 0.89 and 0.93 ms while the host took 9, 26 and 27% of the
// CPUs, and their best runs stayed within 0.36-0.48 ms. So a timing says how much was stolen
// while it ran: a slow median then reads as the machine's, not the program's.
//
// /proc/stat is the kernel's text, read as an outside input all the same: a line that does not
// parse is an error naming the line, and a machine without the file (not Linux, a container
// without /proc) or without the column (kernels before 2.6.11) has no reading, not a zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::profiler {

// Time of some CPUs as /proc/stat counts it, in its ticks (USER_HZ, 100 a second), summed over
// the CPUs.
struct CpuTicks {
  // User, nice, system, idle, iowait, irq, softirq and steal: every tick the CPUs lived through.
  // (Guest time is counted within user and nice already.)
  uint64_t total = 0;
  uint64_t steal = 0;
};

// Sums the lines of `cpus` (CPU numbers, the "cpuN" lines) of /proc/stat's text. An error says
// which line is malformed (fewer than the eight counters through steal, or not numbers) or which
// CPU has no line.
StatusOr<CpuTicks> ParseCpuTicks(std::string_view proc_stat, const std::vector<int>& cpus);

// The ticks of the CPUs this process may run on (its affinity), read now; nullopt where
// /proc/stat cannot be read or parsed.
std::optional<CpuTicks> ReadProcessCpuTicks();

// The share (0 to 1) of the CPUs' time between two readings that the host took; nullopt where
// fewer than `min_ticks` ticks passed in all (too short to say: a tick is 10 ms) or a counter went
// back (a CPU taken offline between the readings).
std::optional<double> StealShare(const CpuTicks& before, const CpuTicks& after, uint64_t min_ticks = 50);

}  // namespace xlens::profiler
