#include "profiler/machine_limits.h"

#include "compiler/support/cpu_features.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "compiler/support/large_allocation.h"
#include "profiler/host_tracer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xlens::profiler {

namespace {

// The last-level cache assumed where sysfs names none (a container without /sys, a CPU whose
// caches Linux does not list): the size of a server's, so that the sweep still reaches memory.
constexpr int64_t kLlcWhenUnknown = int64_t{32} << 20;

// The last level's capacity, all CPUs' together (what a sweep on every CPU fills), or
// kLlcWhenUnknown.
int64_t LastLevelTotalBytes(const std::vector<CacheLevel>& caches) {
  return caches.empty() ? kLlcWhenUnknown : caches.back().total_bytes();
}

// Runs job(member) on `threads` threads at once; the elapsed ns from the first start to the last
// end (the members meet at a barrier first, so they start together).
int64_t RunTeam(int threads, const std::function<void(int)>& job) {
  std::vector<int64_t> start(threads), end(threads);
  std::barrier sync(threads);
  auto member = [&](int m) {
    sync.arrive_and_wait();
    start[m] = NowNs();
    job(m);
    end[m] = NowNs();
  };
  std::vector<std::thread> others;
  for (int m = 1; m < threads; ++m) others.emplace_back(member, m);
  member(0);
  for (auto& t : others) t.join();
  return *std::max_element(end.begin(), end.end()) - *std::min_element(start.begin(), start.end());
}

// The stream kernels in explicit vectors (n is a multiple of 64 floats, arrays 64-byte aligned);
// on x86 in the widest unit, by function-level target attributes so that the rest of the build
// keeps its baseline ISA.
#define XLENS_STREAM_KERNELS(SUFFIX, TARGET_ATTRIBUTE, WIDTH)                                     \
  typedef float Vec##SUFFIX __attribute__((vector_size(WIDTH * 4), aligned(WIDTH * 4)));          \
  TARGET_ATTRIBUTE __attribute__((noinline)) void Copy##SUFFIX(float* a, const float* b, int64_t n) { \
    auto* va = reinterpret_cast<Vec##SUFFIX*>(a);                                                 \
    auto* vb = reinterpret_cast<const Vec##SUFFIX*>(b);                                           \
    _Pragma("GCC unroll 4") for (int64_t i = 0; i < n / WIDTH; ++i) va[i] = vb[i];                \
  }                                                                                               \
  TARGET_ATTRIBUTE __attribute__((noinline)) void Triad##SUFFIX(float* a, const float* b,         \
                                                                const float* c, float s, int64_t n) { \
    auto* va = reinterpret_cast<Vec##SUFFIX*>(a);                                                 \
    auto* vb = reinterpret_cast<const Vec##SUFFIX*>(b);                                           \
    auto* vc = reinterpret_cast<const Vec##SUFFIX*>(c);                                           \
    _Pragma("GCC unroll 4") for (int64_t i = 0; i < n / WIDTH; ++i) va[i] = vb[i] + s * vc[i];    \
  }                                                                                               \
  TARGET_ATTRIBUTE __attribute__((noinline)) float Sum##SUFFIX(const float* a, int64_t n) {       \
    auto* va = reinterpret_cast<const Vec##SUFFIX*>(a);                                           \
    Vec##SUFFIX s0 = {}, s1 = {}, s2 = {}, s3 = {};                                               \
    for (int64_t i = 0; i < n / WIDTH; i += 4) {                                                  \
      s0 += va[i];                                                                                \
      s1 += va[i + 1];                                                                            \
      s2 += va[i + 2];                                                                            \
      s3 += va[i + 3];                                                                            \
    }                                                                                             \
    Vec##SUFFIX s = (s0 + s1) + (s2 + s3);                                                        \
    float total = 0;                                                                              \
    for (int i = 0; i < WIDTH; ++i) total += s[i];                                                \
    return total;                                                                                 \
  }

#if defined(__x86_64__)
XLENS_STREAM_KERNELS(Avx512, __attribute__((target("avx512f"))), 16)
XLENS_STREAM_KERNELS(Avx2, __attribute__((target("avx2,fma"))), 8)
#endif
XLENS_STREAM_KERNELS(Generic, , 8)

void Copy(float* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return CopyAvx512(a, b, n);
  if (CpuHasAvx2Fma()) return CopyAvx2(a, b, n);
#endif
  CopyGeneric(a, b, n);
}

void Triad(float* a, const float* b, const float* c, float s, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return TriadAvx512(a, b, c, s, n);
  if (CpuHasAvx2Fma()) return TriadAvx2(a, b, c, s, n);
#endif
  TriadGeneric(a, b, c, s, n);
}

// Copy and triad with non-temporal stores. Beyond the last-level cache a plain store first reads
// the line it writes (write-allocate: the plain triad moves four arrays' bytes for the three it
// counts); xlens's streamed loops skip that read, so their floor is these loops' rate, or they
// would pass 100% of a bound that is not the machine's best.
#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) void CopyStreamAvx512(float* a, const float* b,
                                                                   int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_stream_ps(a + i, _mm512_load_ps(b + i));
  _mm_sfence();
}
__attribute__((target("avx512f"), noinline)) void TriadStreamAvx512(float* a, const float* b,
                                                                    const float* c, float s,
                                                                    int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    _mm512_stream_ps(a + i, _mm512_fmadd_ps(vs, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
  }
  _mm_sfence();
}
__attribute__((target("avx2,fma"), noinline)) void CopyStreamAvx2(float* a, const float* b,
                                                                  int64_t n) {
  for (int64_t i = 0; i < n; i += 8) _mm256_stream_ps(a + i, _mm256_load_ps(b + i));
  _mm_sfence();
}
__attribute__((target("avx2,fma"), noinline)) void TriadStreamAvx2(float* a, const float* b,
                                                                   const float* c, float s,
                                                                   int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_stream_ps(a + i, _mm256_fmadd_ps(vs, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  }
  _mm_sfence();
}
#endif

bool HasStreamingStores() {
#if defined(__x86_64__)
  return CpuHasAvx512F() || CpuHasAvx2Fma();
#else
  return false;
#endif
}

// Only where HasStreamingStores().
void CopyStreaming(float* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return CopyStreamAvx512(a, b, n);
  CopyStreamAvx2(a, b, n);
#endif
}

void TriadStreaming(float* a, const float* b, const float* c, float s, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return TriadStreamAvx512(a, b, c, s, n);
  TriadStreamAvx2(a, b, c, s, n);
#endif
}

float Sum(const float* a, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return SumAvx512(a, n);
  if (CpuHasAvx2Fma()) return SumAvx2(a, n);
#endif
  return SumGeneric(a, n);
}

// 16 independent FMA chains (latency 4-5 cycles on two pipes: 8-10 would do) in registers.
#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) float FmaAvx512(int64_t iterations) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  float total = 0;
  for (float v : out) total += v;
  return total;
}

__attribute__((target("avx2,fma"), noinline)) float FmaAvx2(int64_t iterations) {
  __m256 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  float total = 0;
  for (float v : out) total += v;
  return total;
}
#endif

std::atomic<float> sink{0};  // keeps the kernels' results alive

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, AlignedFree>;

// As a compiled module's arena is allocated (AllocateLarge: huge pages from 2 MiB), so that a
// stream here walks memory as a module's loops do: on 4 KiB pages the prefetchers restart at every
// page and the bandwidth measured would be below what the modules reach.
Buffer Allocate(int64_t floats) {
  void* p = AllocateLarge(static_cast<size_t>(floats) * 4);
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(static_cast<float*>(p));
}

int Arrays(StreamKernel k) { return k == StreamKernel::kCopy ? 2 : k == StreamKernel::kTriad ? 3 : 1; }

int64_t ParseSize(const std::string& s) {
  int64_t v = std::atoll(s.c_str());
  if (s.find('K') != std::string::npos) v <<= 10;
  if (s.find('M') != std::string::npos) v <<= 20;
  if (s.find('G') != std::string::npos) v <<= 30;
  return v;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

int OnlineCpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

int64_t CacheShareBytes(int64_t bytes, int sharing_cpus) {
  return std::min(bytes, kMaxCacheBytesPerCpu * std::max(1, sharing_cpus));
}

std::vector<CacheLevel> DataCaches() {
  std::vector<CacheLevel> caches;
  const int cpus = OnlineCpus();
  for (int index = 0; index < 16; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) break;
    const std::string type = FirstLine(dir + "type");
    if (type != "Data" && type != "Unified") continue;
    CacheLevel c;
    c.level = std::atoi(FirstLine(dir + "level").c_str());
    c.bytes = ParseSize(FirstLine(dir + "size"));
    // shared_cpu_list, "0-1" or "0": how many CPUs share one instance.
    const std::string shared = FirstLine(dir + "shared_cpu_list");
    int sharing = 1;
    if (auto dash = shared.find('-'); dash != std::string::npos) {
      sharing = std::atoi(shared.c_str() + dash + 1) - std::atoi(shared.c_str()) + 1;
    }
    c.instances = std::max(1, cpus / std::max(1, sharing));
    c.reported_bytes = c.bytes;
    c.bytes = CacheShareBytes(c.bytes, sharing);
    if (c.bytes > 0) caches.push_back(c);
  }
  std::sort(caches.begin(), caches.end(), [](const CacheLevel& a, const CacheLevel& b) { return a.level < b.level; });
  return caches;
}

int64_t LastLevelCacheBytes() {
  static const int64_t bytes = [] {
    int64_t largest = 0;
    for (const CacheLevel& level : DataCaches()) largest = std::max(largest, level.bytes);
    return largest;
  }();
  return bytes;
}

const char* StreamKernelName(StreamKernel kernel) {
  return kernel == StreamKernel::kCopy ? "copy" : kernel == StreamKernel::kTriad ? "triad" : "read";
}

const char* WidestVectorIsa() {
#if defined(__x86_64__)
  if (CpuHasAvx512F()) return "avx512f";
  if (CpuHasAvx2Fma()) return "avx2";
#endif
  return "scalar";
}

struct StreamArrays::Buffers {
  std::vector<Buffer> a, b, c;
};

StreamArrays::StreamArrays(StreamKernel kernel, int64_t bytes, int threads)
    : kernel_(kernel), threads_(std::max(1, threads)), arrays_(std::make_unique<Buffers>()) {
  const int arrays = Arrays(kernel);
  // Floats per array per thread: whole unrolled vector steps.
  per_member_ = std::max<int64_t>(64, bytes / 4 / arrays / threads_ / 64 * 64);
  moved_ = per_member_ * 4 * arrays * threads_;
  arrays_->a.resize(threads_);
  arrays_->b.resize(threads_);
  arrays_->c.resize(threads_);
  // Only the arrays the kernel names (the read-only sum reads b; copy writes a from b).
  for (int m = 0; m < threads_; ++m) {
    if (kernel != StreamKernel::kRead) arrays_->a[m] = Allocate(per_member_);
    arrays_->b[m] = Allocate(per_member_);
    if (kernel == StreamKernel::kTriad) arrays_->c[m] = Allocate(per_member_);
  }
  // First touch by the thread that uses the pages.
  RunTeam(threads_, [&](int m) {
    for (auto [array, value] : {std::pair{&arrays_->a, 0.0f}, {&arrays_->b, 1.0f}, {&arrays_->c, 2.0f}}) {
      if ((*array)[m]) std::fill_n((*array)[m].get(), per_member_, value);
    }
  });
  // In a cache the non-temporal stores only lose.
  const int64_t llc = LastLevelCacheBytes();
  streaming_ = kernel != StreamKernel::kRead && HasStreamingStores() && llc > 0 && bytes > llc;
}

StreamArrays::~StreamArrays() = default;

// One pass of `kernel` over n floats from `offset` of one member's arrays; the sum's result added
// to `total`.
void RunKernel(StreamKernel kernel, bool streaming, float* a, const float* b, const float* c, int64_t offset,
               int64_t n, float* total) {
  switch (kernel) {
    case StreamKernel::kCopy:
      streaming ? CopyStreaming(a + offset, b + offset, n) : Copy(a + offset, b + offset, n);
      break;
    case StreamKernel::kTriad:
      streaming ? TriadStreaming(a + offset, b + offset, c + offset, 3.0f, n)
                : Triad(a + offset, b + offset, c + offset, 3.0f, n);
      break;
    case StreamKernel::kRead: *total += Sum(b + offset, n); break;
  }
  asm volatile("" ::: "memory");
}

int64_t StreamArrays::TimeNs(int64_t passes, bool streaming) {
  streaming = streaming && streaming_;
  const int64_t n = per_member_;
  return RunTeam(threads_, [&](int m) {
    float total = 0;
    for (int64_t i = 0; i < passes; ++i) {
      RunKernel(kernel_, streaming, arrays_->a[m].get(), arrays_->b[m].get(), arrays_->c[m].get(), 0, n, &total);
    }
    sink.store(total, std::memory_order_relaxed);
  });
}

int64_t StreamArrays::TimeNs(int64_t passes, bool streaming, ThreadPool& pool) {
  streaming = streaming && streaming_;
  // Each member's slice in blocks of whole unrolled vector steps (64 floats), as many as the pool
  // deals chunks to a thread, so that a thread woken late holds back one block and the others
  // take the rest of its share, as they do a module's loop.
  const int64_t steps = per_member_ / 64;
  const int64_t blocks = std::min<int64_t>(steps, ThreadPool::kChunksPerThread);
  const int64_t start = NowNs();
  for (int64_t i = 0; i < passes; ++i) {
    pool.ParallelFor(blocks * threads_, 1, [&](int64_t begin, int64_t end) {
      float total = 0;
      for (int64_t t = begin; t < end; ++t) {
        const int64_t m = t / blocks, j = t % blocks;
        const int64_t from = steps * j / blocks * 64, to = steps * (j + 1) / blocks * 64;
        RunKernel(kernel_, streaming, arrays_->a[m].get(), arrays_->b[m].get(), arrays_->c[m].get(), from,
                  to - from, &total);
      }
      sink.store(total, std::memory_order_relaxed);
    });
  }
  return NowNs() - start;
}

double StreamBandwidthGBps(StreamKernel kernel, int64_t bytes, int threads, int repetitions,
                           int64_t bytes_per_repetition) {
  StreamArrays arrays(kernel, bytes, threads);
  const int64_t inner = std::max<int64_t>(1, bytes_per_repetition / arrays.moved_bytes());
  // Beyond the last-level cache copy and triad are also timed with non-temporal stores, and the
  // better of the two kept.
  double best = 0;
  for (int variant = 0; variant < (arrays.has_streaming_variant() ? 2 : 1); ++variant) {
    for (int r = 0; r <= repetitions; ++r) {  // the first untimed: it warms the caches
      const int64_t ns = arrays.TimeNs(inner, variant == 1);
      if (r > 0) best = std::max(best, static_cast<double>(arrays.moved_bytes()) * inner / std::max<int64_t>(ns, 1));
    }
  }
  return best;
}

double PeakGflops(int threads, int repetitions, int64_t iterations, bool narrower) {
  threads = std::max(1, threads);
  int width = 1;
  std::function<float(int64_t)> chains;
#if defined(__x86_64__)
  if (CpuHasAvx512F() && !narrower) {
    width = 16;
    chains = FmaAvx512;
  } else if (CpuHasAvx2Fma()) {
    width = 8;
    chains = FmaAvx2;
  }
#endif
  if (!chains) {  // no known vector unit: a scalar floor, 16 chains of multiply-adds
    chains = [](int64_t n) {
      float acc[16];
      for (int i = 0; i < 16; ++i) acc[i] = 0.001f * i;
      for (int64_t it = 0; it < n; ++it) {
        for (float& x : acc) x = x * 0.999999f + 1e-7f;
      }
      float total = 0;
      for (float x : acc) total += x;
      return total;
    };
  }
  // Each thread's own best time, summed as rates: the FMA units of one core do not slow those of
  // another, so the peak of all is the sum of each one's, and a neighbour that holds a core for a
  // while (which would stretch every repetition of the team as a whole) costs nothing as long as
  // each thread meets one quiet repetition.
  const double flops = 16.0 * width * 2 * iterations;
  std::vector<int64_t> best_ns(threads, INT64_MAX);
  for (int r = 0; r < repetitions; ++r) {
    RunTeam(threads, [&](int m) {
      const int64_t start = NowNs();
      sink.store(chains(iterations), std::memory_order_relaxed);
      best_ns[m] = std::min(best_ns[m], std::max<int64_t>(NowNs() - start, 1));
    });
  }
  double total = 0;
  for (int64_t ns : best_ns) total += flops / ns;
  return total;
}

double BandwidthPoint::best_gbps() const { return std::max({copy_gbps, triad_gbps, read_gbps}); }

double MachineLimits::BandwidthGBps(double bytes) const {
  std::vector<BandwidthPoint> points = sweep;
  if (memory.working_set_bytes > 0) points.push_back(memory);
  std::sort(points.begin(), points.end(),
            [](const BandwidthPoint& a, const BandwidthPoint& b) { return a.working_set_bytes < b.working_set_bytes; });
  if (points.empty()) return 0;
  size_t start = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].working_set_bytes <= bytes) start = i;
  }
  double best = 0;
  for (size_t i = start; i < points.size(); ++i) best = std::max(best, points[i].best_gbps());
  return best;
}

std::string MachineLimits::LevelOf(double bytes) const {
  for (size_t i = 0; i < caches.size(); ++i) {
    if (bytes <= caches[i].total_bytes()) {
      return i + 1 == caches.size() && i > 0 ? "LLC" : fmt::format("L{}", caches[i].level);
    }
  }
  return "mem";
}

double MachineLimits::BoundNs(double bytes, double flops) const {
  const double gbps = bytes > 0 ? BandwidthGBps(bytes) : 0;
  const double memory_ns = gbps > 0 ? bytes / gbps : 0;  // bytes per ns is GB/s
  const double compute_ns = peak_gflops > 0 ? flops / peak_gflops : 0;
  return std::max(memory_ns, compute_ns);
}

std::string MachineLimits::Summary() const {
  std::string out = fmt::format("memory {:.1f} GB/s", memory.best_gbps());
  for (auto level = caches.rbegin(); level != caches.rend(); ++level) {
    // The sweep point that lies in the level: half its capacity.
    out += fmt::format(", {} {:.0f}", LevelOf(level->total_bytes()), BandwidthGBps(level->total_bytes() / 2.0));
  }
  return out + fmt::format(" GB/s; peak f32 {:.0f} GFLOP/s ({}, {} threads)", peak_gflops, WidestVectorIsa(), threads);
}

std::vector<int64_t> SweepWorkingSets(const std::vector<CacheLevel>& caches, bool fine, int64_t memory_bytes) {
  const int64_t llc = LastLevelTotalBytes(caches);
  std::vector<int64_t> sizes;
  if (fine) {
    // Half-octave steps: a working set just past a point is held to that point's bandwidth, so
    // the finer the steps, the less a bound near a cache's capacity overstates it. On to eight
    // times the last-level cache: at twice it a working set still hits in it a good part of
    // the time, and would hold a workload of four times it to more than memory gives.
    const int64_t last = std::min(8 * llc, 3 * memory_bytes);
    for (int64_t bytes = 16 << 10; bytes <= last; bytes *= 2) {
      sizes.push_back(bytes);
      if (bytes < last) sizes.push_back(static_cast<int64_t>(bytes * 1.4142) / 4096 * 4096);
    }
    return sizes;
  }
  // Half of each level's capacity (well inside it) and its whole capacity, and twice the last
  // level's. Without the capacity points a working set just past a level was held to the rate
  // well inside it: layer norm's 33.6 MB on a 32 MiB LLC to the 16 MiB point's 152 GB/s (36% of
  // its bound), where it ran at 54 GB/s against memory's 70; the point at 32 MiB, which no
  // longer fits with anything else, read 46-70 GB/s there.
  for (const CacheLevel& level : caches) {
    sizes.push_back(level.total_bytes() / 2);
    sizes.push_back(level.total_bytes());
  }
  sizes.push_back(2 * llc);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

MachineLimits MeasureMachineLimits(const MachineLimitsOptions& options) {
  MachineLimits limits;
  limits.threads = options.threads > 0 ? options.threads : OnlineCpus();
  limits.caches = DataCaches();
  const int64_t llc = LastLevelTotalBytes(limits.caches);
  const int reps = std::max(1, options.repetitions);
  auto measure = [&](int64_t bytes, int64_t per_repetition) {
    BandwidthPoint p;
    p.working_set_bytes = bytes;
    p.copy_gbps = StreamBandwidthGBps(StreamKernel::kCopy, bytes, limits.threads, reps, per_repetition);
    p.triad_gbps = StreamBandwidthGBps(StreamKernel::kTriad, bytes, limits.threads, reps, per_repetition);
    p.read_gbps = StreamBandwidthGBps(StreamKernel::kRead, bytes, limits.threads, reps, per_repetition);
    return p;
  };
  // Each in-cache repetition moves about 32 MiB: a few hundred microseconds.
  constexpr int64_t kPerRepetition = int64_t{32} << 20;
  const int64_t array = options.memory_bytes > 0 ? options.memory_bytes : 4 * llc;
  for (int64_t bytes : SweepWorkingSets(limits.caches, options.fine, array)) {
    limits.sweep.push_back(measure(bytes, kPerRepetition));
  }
  // STREAM's arrays: each of `array` bytes, whatever the kernel.
  limits.memory.working_set_bytes = array * 3;
  limits.memory.copy_gbps = StreamBandwidthGBps(StreamKernel::kCopy, array * 2, limits.threads, reps, 1);
  limits.memory.triad_gbps = StreamBandwidthGBps(StreamKernel::kTriad, array * 3, limits.threads, reps, 1);
  limits.memory.read_gbps = StreamBandwidthGBps(StreamKernel::kRead, array, limits.threads, reps, 1);
  // About a millisecond a repetition.
  limits.peak_gflops = PeakGflops(limits.threads, 6 * reps, 1 << 18);
#if defined(__x86_64__)
  if (CpuHasAvx512F()) limits.peak_gflops = std::max(limits.peak_gflops, PeakGflops(limits.threads, 6 * reps, 1 << 18, true));
#endif
  return limits;
}

}  // namespace xlens::profiler
