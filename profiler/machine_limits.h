// What this machine can do, measured: the roofline a kernel's time is held to. The bandwidth of
// STREAM's kernels (copy a[i] = b[i], triad a[i] = b[i] + s c[i], and a read-only sum) over
// working sets from L1 to well beyond the last-level cache, and the peak f32 FLOP/s of FMA chains on
// the widest vector unit the CPU has. A kernel whose working set fits in a cache is held to that
// cache's bandwidth, never to memory's, so its share of the bound cannot pass 100% by hitting
// in cache.
//
// Bytes are counted as STREAM counts them: the arrays the loop names, no write-allocate traffic,
// as the cost analysis counts a kernel's bytes (its operands and results).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/support/thread_pool.h"

namespace xlens::profiler {

// A data or unified cache level, from sysfs.
struct CacheLevel {
  int level = 0;
  int64_t bytes = 0;           // one instance, what its CPUs can count on (CacheShareBytes)
  int instances = 1;           // instances among the online CPUs
  int64_t reported_bytes = 0;  // one instance, as sysfs says
  int64_t total_bytes() const { return bytes * instances; }
};

// The most cache a CPU counts on: above the largest share per core of any part (AMD's
// stacked-cache parts, 96 MiB over a chiplet's 8 cores; Intel's Granite Rapids, 504 MB over 128).
// A virtual machine sees its host's whole cache as shared by its own few CPUs (480 MiB over 2 on a
// 2-CPU Xeon VM, cpuid's leaf 4 included) while the host's other CPUs, other machines, use it too.
// Counted whole there, no loop under 240 MiB got streaming stores (cpu_streaming_store.h), the
// stream kernels had no streaming variant under 480 MiB, and STREAM's rule (arrays four times the
// cache) sized memory's arrays at 1.9 GB each. The 20 is fitted on that VM (see
// cpu_streaming_store.h: 32 MiB working sets lose streamed there, 49 MiB win), a line the cache
// counted as 40 MiB puts between them; on every real part it counts the cache whole.
constexpr int64_t kMaxCacheBytesPerCpu = int64_t{20} << 20;

// The cache `sharing_cpus` CPUs that share an instance of `bytes` can count on between them.
int64_t CacheShareBytes(int64_t bytes, int sharing_cpus);

// The data caches of this machine, innermost first; empty where sysfs does not say.
std::vector<CacheLevel> DataCaches();
// The bytes of one instance of the outermost data cache (what one CPU sees, at most its share:
// CacheShareBytes), 0 where sysfs does not say; read once per process.
int64_t LastLevelCacheBytes();

enum class StreamKernel { kCopy, kTriad, kRead };
const char* StreamKernelName(StreamKernel kernel);  // "copy", "triad", "read"

// GB/s of `kernel` over a working set of `bytes` (all its arrays together), split evenly over
// `threads` threads that meet at a barrier before timing; each repetition moves at least
// `bytes_per_repetition` (the slice is swept again until it has). The best of `repetitions`,
// after an untimed one; beyond the last-level cache copy and triad are also timed with
// non-temporal stores (no write-allocate read), the better kept.
double StreamBandwidthGBps(StreamKernel kernel, int64_t bytes, int threads, int repetitions,
                           int64_t bytes_per_repetition);

// The arrays of one stream kernel over a working set of `bytes` (all its arrays together), split
// evenly over `threads` threads, allocated as a compiled module's arena is (huge pages from 2 MiB)
// and first touched by the thread that uses them: StreamBandwidthGBps's, kept so that single passes
// can be timed between other work (tests/bench/machine_limits --paired alternates them with a
// module's runs).
class StreamArrays {
 public:
  StreamArrays(StreamKernel kernel, int64_t bytes, int threads);
  ~StreamArrays();
  StreamArrays(const StreamArrays&) = delete;
  StreamArrays& operator=(const StreamArrays&) = delete;

  // Whether the kernel also has a variant with non-temporal stores here: copy and triad beyond
  // the last-level cache, where a plain store first reads the line it writes.
  bool has_streaming_variant() const { return streaming_; }
  // The bytes one pass moves, counted as STREAM counts them.
  int64_t moved_bytes() const { return moved_; }
  // ns of `passes` passes over the arrays on all the threads at once (from the first thread's start
  // to the last one's end), with non-temporal stores where `streaming` (and has_streaming_variant).
  int64_t TimeNs(int64_t passes = 1, bool streaming = false);
  // The same passes on `pool`'s threads (the caller included), each pass one ParallelFor over
  // blocks of the members' slices: the threads a compiled module runs on, started once and
  // waiting between passes as they wait between a module's loops, with the pool's stealing in
  // place of a static split. Each TimeNs above starts threads of its own and splits evenly, which
  // a busy machine punishes more than the pool (a b + 3c module beat its own triad floor, median
  // ratio 1.11-1.38, beside other work).
  int64_t TimeNs(int64_t passes, bool streaming, ThreadPool& pool);

 private:
  struct Buffers;
  StreamKernel kernel_;
  int threads_;
  int64_t per_member_ = 0, moved_ = 0;
  bool streaming_ = false;
  std::unique_ptr<Buffers> arrays_;
};

// "avx512f", "avx2" or "scalar": the vector unit PeakGflops and the stream kernels use.
const char* WidestVectorIsa();

// GFLOP/s of 16 independent FMA chains per thread on `threads` threads running at once: the sum
// of each thread's best of `repetitions` runs of `iterations` steps; `narrower` uses 256-bit
// vectors on an AVX-512 CPU (some cores issue 512-bit FMAs at half rate).
double PeakGflops(int threads, int repetitions, int64_t iterations, bool narrower = false);

// One point of the working-set sweep, on all threads.
struct BandwidthPoint {
  int64_t working_set_bytes = 0;
  double copy_gbps = 0, triad_gbps = 0, read_gbps = 0;
  double best_gbps() const;
};

struct MachineLimits {
  int threads = 0;
  std::vector<CacheLevel> caches;
  std::vector<BandwidthPoint> sweep;  // ascending working sets
  BandwidthPoint memory;              // arrays well beyond the last-level cache
  double peak_gflops = 0;             // all cores
  // Where the figures come from, for the profile's header: "measured, this machine" or when they
  // were measured and the file that keeps them (ThisMachineLimits).
  std::string origin = "measured, this machine";

  // The most any of the stream kernels moves per second over a working set of `bytes`: the
  // largest sweep point not above it (or the smallest), or a larger one that measured faster
  // (the curve falls with size; a busy machine makes it jagged). An upper bound for a kernel
  // that moves `bytes`, whatever it reads and writes.
  double BandwidthGBps(double bytes) const;
  // "L1", "L2", ... "LLC" for the innermost level whose total capacity holds `bytes`; "mem".
  std::string LevelOf(double bytes) const;
  // The shortest time a kernel moving `bytes` and computing `flops` can take (ns): the longer of
  // the two floors. 0 when neither is known.
  double BoundNs(double bytes, double flops) const;
  // One line: "memory 31.2 GB/s, LLC 62, L2 210, L1 480 GB/s; peak f32 235 GFLOP/s (avx512f)".
  std::string Summary() const;
};

struct MachineLimitsOptions {
  int threads = 0;          // 0: every online CPU
  int repetitions = 3;      // per point
  int64_t memory_bytes = 0;  // per STREAM array; 0: four times the last-level cache
  bool fine = true;  // the sweep at every half-octave to 8x the last level, or at each level's half and whole
};

// The working sets the sweep measures, ascending, for `caches` (innermost first) and memory's
// arrays of `memory_bytes` each: MachineLimitsOptions::fine's half-octaves, or each level's half
// and whole capacity and twice the last level's.
std::vector<int64_t> SweepWorkingSets(const std::vector<CacheLevel>& caches, bool fine, int64_t memory_bytes);

MachineLimits MeasureMachineLimits(const MachineLimitsOptions& options);

}  // namespace xlens::profiler
