// Schedules of batch norm in training, written by hand, against the bytes they move: whether a
// schedule that takes a block of channels at a time (its sums over the batch, then its outputs,
// while the block is in cache) beats the two sweeps xlens emits (every channel's sums over the
// batch, then every output), and why.
//
// x and dy are f32[rows, channels] (NHWC with N, H and W joined: tests/bench/codegen_vs_xla.py's
// batch_norm_train is f32[25088, 128]); each schedule computes the four per-channel sums
// (x, x^2, dy, x * dy), the per-channel factors from them, and writes y = a x + b and
// dx = p dy + q x + r with streaming stores, as xlens's kernel does (cpu_streaming_store.h):
//   copy          y = x, dx = dy: the one-pass floor (the bytes a schedule must move, 51.4 MB);
//   two sweeps    the sums over slices of rows, combined, then the outputs over rows (xlens's
//                 schedule: it reads x and dy twice, 77.1 MB);
//   blocks of W   one task per block of W channels: its sums over every row, then its outputs.
// Then, on one thread, a read-only pass over x and dy, a streaming-store pass over y and dx and the
// copy of one into the other (whether a core's reads and streamed writes overlap), and the sweeps
// a block schedule is made of: every line of x in address order
// against all the blocks' sweeps one after another (the same lines, each once); and one block's
// lines (one 64-byte line of each row of 512 bytes) swept again and again, against as many lines
// 64 bytes further apart, and as many in a row: which of them the L2 keeps between passes.
// Every schedule runs on xlens's thread pool (ThreadPool::Default(), the caller and one worker
// per other CPU), the schedules alternating, round after round; each round's median and the
// best run are printed.
//
// What it shows on this machine (2 cores, 2 MiB L2 each, the LLC holding x and dy between runs),
// six runs of 8 rounds at load 9-13: copy best 0.557-0.612 ms, two sweeps 0.930-1.023 (58-62% of
// copy: 51.4 of the 77.1 MB they move), blocks of 16, 32 and 64 channels 2.35-2.63, 1.56-1.84 and
// 1.14-1.43 ms (22-25%, 32-37%, 41-51%); the medians of the rounds in the same order in every run.
// A block schedule moves no fewer bytes through each core's L2 and moves them slower:
//   - lines 512 bytes apart share their address bits 6-8, so they fall in one eighth of the L2's
//     sets: the L2 keeps at most 256 KB of a block, where its lines of x and dy are 3.2 MB, so
//     the block's outputs read its lines from the LLC again, as the second sweep does. One block's
//     lines swept again and again on one thread ran at 13-15 GB/s, as many lines 576 bytes apart
//     (every set) at 28-65, as many in a row at 82-90 (from L2); at a quarter of the batch
//     (--rows=6272, 392 KB of lines) 18, 92 and 99 GB/s;
//   - every eighth line comes from the LLC at a third of the rate of lines in address order: x's
//     lines, each once, in eight block sweeps took 2.8-3.2x one sweep in order.
// A core's reads and streamed writes overlap little: one thread read x and dy in 0.55-0.86 ms,
// wrote y and dx in 0.98-1.06, and copied one into the other in 1.40-1.82 (87-97% of the two).
// So blocks of channels read the batch once from the L2 only where a block's lines of x and dy
// fit 256 KB (16 channels of at most 2048 rows), where the batch is in the L2 anyway.
//
// xlens's own kernel for the row (codegen_vs_xla.py's batch_norm_train) runs as fast as the two
// sweeps here when both run in one process. Its phases (the LLVM IR of `xlens run
// --xla_dump_to`, compiled with llc into a driver that runs each phase on this pool as
// KernelThunk does, with the two sweeps and the copy above alternating in the same process,
// 3 runs of 8 rounds of 40 at load 3-4): sums over rows 363-387 us best (the two sweeps' sums
// 383-392), the output sweep 728-793 (the two sweeps' outputs 753-813, the copy 743-789), the
// shift kernel that comes first 9-11 us, the combine 3 us, seven phases of per-channel factors
// under 1 us. The whole module took 1.12-1.22 ms best, the two sweeps 1.16-1.21. Figures from
// different processes mislead: this program's copy took 0.58-0.64 ms best in some processes and
// 0.78-0.89 in others (and in the driver) started minutes apart, with the same arrays on huge
// pages. With a core's copy about its read plus its streamed write (above), two sweeps cost two
// reads and a write, about 0.35 + 0.35 + 0.5 ms on two cores (the one-thread passes halved):
// two thirds of copy's rate, what the row reads.
//
// Usage: batch_norm_schedules [--rows=25088] [--channels=128] [--rounds=8] [--runs=40]
// Built by scripts/build.sh --target batch_norm_schedules (compiled with -march=native where the
// compiler targets x86-64: it needs AVX-512, and exits with 77 where the compiler had none).
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "compiler/support/large_allocation.h"
#include "compiler/support/thread_pool.h"

namespace {

#ifdef __AVX512F__

int64_t R = 25088;  // rows: N * H * W
int64_t C = 128;    // channels, the minor dimension
float *x, *dy, *y, *dx;
// Per channel: the four sums, and the factors of y = a x + b, dx = p dy + q x + r.
std::vector<float> sums, factors;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

float* Array(int64_t elements) {
  auto* p = static_cast<float*>(xlens::AllocateLarge(elements * sizeof(float)));
  std::memset(p, 0, elements * sizeof(float));
  return p;
}

// The four sums of channels [c, c + 16 * kLanes) over rows [r0, r1), added to `out` (4 x C): eight
// accumulators of each sum, 8 / kLanes rows a step, so that no chain of adds waits on another.
template <int kLanes>
void Sums(int64_t r0, int64_t r1, int64_t c, float* out) {
  constexpr int kWays = 8 / kLanes;
  __m512 acc[4][8];
  for (auto& k : acc) for (auto& v : k) v = _mm512_setzero_ps();
  int64_t i = r0;
  for (; i + kWays <= r1; i += kWays) {
    for (int u = 0; u < kWays; ++u) {
      for (int j = 0; j < kLanes; ++j) {
        const __m512 xv = _mm512_load_ps(x + (i + u) * C + c + 16 * j);
        const __m512 dv = _mm512_load_ps(dy + (i + u) * C + c + 16 * j);
        acc[0][u * kLanes + j] = _mm512_add_ps(acc[0][u * kLanes + j], xv);
        acc[1][u * kLanes + j] = _mm512_fmadd_ps(xv, xv, acc[1][u * kLanes + j]);
        acc[2][u * kLanes + j] = _mm512_add_ps(acc[2][u * kLanes + j], dv);
        acc[3][u * kLanes + j] = _mm512_fmadd_ps(xv, dv, acc[3][u * kLanes + j]);
      }
    }
  }
  for (; i < r1; ++i) {
    for (int j = 0; j < kLanes; ++j) {
      const __m512 xv = _mm512_load_ps(x + i * C + c + 16 * j);
      const __m512 dv = _mm512_load_ps(dy + i * C + c + 16 * j);
      acc[0][j] = _mm512_add_ps(acc[0][j], xv);
      acc[1][j] = _mm512_fmadd_ps(xv, xv, acc[1][j]);
      acc[2][j] = _mm512_add_ps(acc[2][j], dv);
      acc[3][j] = _mm512_fmadd_ps(xv, dv, acc[3][j]);
    }
  }
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < kLanes; ++j) {
      __m512 t = acc[k][j];
      for (int u = 1; u < kWays; ++u) t = _mm512_add_ps(t, acc[k][u * kLanes + j]);
      float* o = out + k * C + c + 16 * j;
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), t));
    }
  }
}

// The sums of channels [c0, c1) over rows [r0, r1), 128 channels at a time.
void RangeSums(int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  for (int64_t c = c0; c < c1; c += 128) {
    switch (std::min<int64_t>(128, c1 - c) / 16) {
      case 1: Sums<1>(r0, r1, c, out); break;
      case 2: case 3: Sums<2>(r0, r1, c, out); if (c1 - c >= 48) Sums<1>(r0, r1, c + 32, out); break;
      case 4: case 5: case 6: case 7:
        Sums<4>(r0, r1, c, out);
        if (c1 - c > 64) RangeSums(r0, r1, c + 64, std::min(c1, c + 128), out);
        break;
      default: Sums<8>(r0, r1, c, out);
    }
  }
}

// Batch norm's factors for channels [c0, c1) from their sums (gamma 1, beta 0).
void Factors(int64_t c0, int64_t c1, const float* s) {
  const float n = static_cast<float>(R);
  for (int64_t c = c0; c < c1; ++c) {
    const float mean = s[c] / n, var = std::max(s[C + c] / n - mean * mean, 0.0f);
    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
    const float sum_dy = s[2 * C + c], sum_xhat_dy = (s[3 * C + c] - mean * sum_dy) * rstd;
    const float k = rstd * sum_xhat_dy * rstd / n;
    factors[c] = rstd;
    factors[C + c] = -mean * rstd;
    factors[2 * C + c] = rstd;
    factors[3 * C + c] = -k;
    factors[4 * C + c] = -rstd * sum_dy / n + mean * k;
  }
}

// y and dx of rows [r0, r1), channels [c0, c1), with streaming stores.
void Outputs(int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const float* f = factors.data();
  for (int64_t i = r0; i < r1; ++i) {
    for (int64_t c = c0; c < c1; c += 16) {
      const __m512 xv = _mm512_load_ps(x + i * C + c), dv = _mm512_load_ps(dy + i * C + c);
      const __m512 yv = _mm512_fmadd_ps(xv, _mm512_loadu_ps(f + c), _mm512_loadu_ps(f + C + c));
      const __m512 dxv = _mm512_fmadd_ps(
          dv, _mm512_loadu_ps(f + 2 * C + c),
          _mm512_fmadd_ps(xv, _mm512_loadu_ps(f + 3 * C + c), _mm512_loadu_ps(f + 4 * C + c)));
      _mm512_stream_ps(y + i * C + c, yv);
      _mm512_stream_ps(dx + i * C + c, dxv);
    }
  }
}

constexpr int64_t kRowsPerTask = 392;  // 196 KB of x and dy a task

void Copy() {
  xlens::ThreadPool::Default().ParallelFor((R + kRowsPerTask - 1) / kRowsPerTask, 1, [](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * kRowsPerTask; i < std::min(R, t1 * kRowsPerTask); ++i) {
      for (int64_t c = 0; c < C; c += 16) {
        _mm512_stream_ps(y + i * C + c, _mm512_load_ps(x + i * C + c));
        _mm512_stream_ps(dx + i * C + c, _mm512_load_ps(dy + i * C + c));
      }
    }
  });
  _mm_sfence();
}

// xlens's schedule: the sums in 64 slices of rows (partials combined in slice order), then the
// outputs over rows.
void TwoSweeps() {
  constexpr int64_t kSlices = 64;
  static std::vector<float> partials;
  partials.assign(kSlices * 4 * C, 0.0f);
  xlens::ThreadPool::Default().ParallelFor(kSlices, 1, [](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      RangeSums(R * s / kSlices, R * (s + 1) / kSlices, 0, C, partials.data() + s * 4 * C);
    }
  });
  std::fill(sums.begin(), sums.end(), 0.0f);
  for (int64_t s = 0; s < kSlices; ++s) {
    for (int64_t k = 0; k < 4 * C; ++k) sums[k] += partials[s * 4 * C + k];
  }
  Factors(0, C, sums.data());
  xlens::ThreadPool::Default().ParallelFor((R + kRowsPerTask - 1) / kRowsPerTask, 1, [](int64_t t0, int64_t t1) {
    Outputs(t0 * kRowsPerTask, std::min(R, t1 * kRowsPerTask), 0, C);
  });
  _mm_sfence();
}

// One task per block of `width` channels: its sums over the whole batch, its factors, its outputs.
void Blocks(int64_t width) {
  std::fill(sums.begin(), sums.end(), 0.0f);
  xlens::ThreadPool::Default().ParallelFor(C / width, 1, [width](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      RangeSums(0, R, b * width, (b + 1) * width, sums.data());
      Factors(b * width, (b + 1) * width, sums.data());
      Outputs(0, R, b * width, (b + 1) * width);
    }
  });
  _mm_sfence();
}

volatile float sink;

// One thread, over all of x and dy, y and dx: a read-only sum (kind 0), streaming stores (1), or a
// copy of x and dy into y and dx with streaming stores (2).
double Pass(int kind) {
  const double t0 = Now();
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < R * C; i += 16) {
    if (kind == 0) {
      s0 = _mm512_add_ps(s0, _mm512_load_ps(x + i));
      s1 = _mm512_add_ps(s1, _mm512_load_ps(dy + i));
    } else if (kind == 1) {
      _mm512_stream_ps(y + i, one);
      _mm512_stream_ps(dx + i, one);
    } else {
      _mm512_stream_ps(y + i, _mm512_load_ps(x + i));
      _mm512_stream_ps(dx + i, _mm512_load_ps(dy + i));
    }
  }
  _mm_sfence();
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(s0, s1));
  sink = lanes[0];
  return Now() - t0;
}

// One thread: a read-only sum over `lines` lines of x, `stride` bytes apart from `first`.
double SweepLines(int64_t first, int64_t lines, int64_t stride) {
  const double t0 = Now();
  __m512 s[8];
  for (auto& v : s) v = _mm512_setzero_ps();
  const char* base = reinterpret_cast<const char*>(x) + first;
  for (int64_t i = 0; i + 8 <= lines; i += 8) {
    for (int u = 0; u < 8; ++u) s[u] = _mm512_add_ps(s[u], _mm512_load_ps(reinterpret_cast<const float*>(base + (i + u) * stride)));
  }
  for (int u = 1; u < 8; ++u) s[0] = _mm512_add_ps(s[0], s[u]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s[0]);
  sink = lanes[0];
  return Now() - t0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int argc, char** argv) {
  int rounds = 8, runs = 40;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      return a.rfind(name, 0) == 0 ? a.c_str() + std::strlen(name) : nullptr;
    };
    if (const char* v = value("--rows=")) R = std::atoll(v);
    else if (const char* v = value("--channels=")) C = std::atoll(v);
    else if (const char* v = value("--rounds=")) rounds = std::atoi(v);
    else if (const char* v = value("--runs=")) runs = std::atoi(v);
    else {
      std::fprintf(stderr, "batch_norm_schedules: unknown argument %s (--rows=, --channels=, --rounds=, --runs=)\n", argv[i]);
      return 1;
    }
  }
  if (R < 8 || C < 16 || C % 16 != 0) {
    std::fprintf(stderr, "batch_norm_schedules: --channels must be a multiple of 16, --rows at least 8\n");
    return 1;
  }
  // x has a line more a row's worth at its end, for the sweep of rows 64 bytes longer (below).
  x = Array(R * C + R * 16), dy = Array(R * C), y = Array(R * C), dx = Array(R * C);
  for (int64_t i = 0; i < R * C; ++i) {
    x[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f;
    dy[i] = static_cast<float>((i * 104729) % 1000) * 1e-3f - 0.5f;
  }
  sums.assign(4 * C, 0.0f);
  factors.assign(5 * C, 0.0f);

  struct Schedule {
    std::string name;
    std::function<void()> run;
    std::vector<double> medians;
    double best = 1e9;
  };
  std::vector<Schedule> schedules;
  schedules.push_back({"copy (one pass)", Copy, {}});
  schedules.push_back({"two sweeps", TwoSweeps, {}});
  for (int64_t w : {16, 32, 64}) {
    if (C % w == 0 && C / w >= 2) schedules.push_back({"blocks of " + std::to_string(w), [w] { Blocks(w); }, {}});
  }
  // The schedules agree (the reference: two sweeps).
  std::vector<float> ref_y(R * C), ref_dx(R * C);
  TwoSweeps();
  std::copy(y, y + R * C, ref_y.begin());
  std::copy(dx, dx + R * C, ref_dx.begin());
  for (size_t s = 2; s < schedules.size(); ++s) {
    schedules[s].run();
    for (int64_t i = 0; i < R * C; ++i) {
      if (std::abs(y[i] - ref_y[i]) > 1e-3f * (1 + std::abs(ref_y[i])) ||
          std::abs(dx[i] - ref_dx[i]) > 1e-3f * (1 + std::abs(ref_dx[i]))) {
        std::fprintf(stderr, "batch_norm_schedules: %s differs at %lld\n", schedules[s].name.c_str(), static_cast<long long>(i));
        return 1;
      }
    }
  }
  for (int r = 0; r < rounds; ++r) {
    for (Schedule& s : schedules) {
      std::vector<double> times;
      for (int k = 0; k < runs; ++k) {
        const double t0 = Now();
        s.run();
        times.push_back(Now() - t0);
      }
      s.medians.push_back(Median(times));
      s.best = std::min(s.best, *std::min_element(times.begin(), times.end()));
    }
  }
  const double mb = static_cast<double>(R * C * 4) / 1e6;
  std::printf("x, dy f32[%lld, %lld] (%.1f MB each), %d threads, %d rounds of %d runs, alternating\n",
              static_cast<long long>(R), static_cast<long long>(C), mb,
              xlens::ThreadPool::Default().parallelism(), rounds, runs);
  const double copy_median = Median(schedules[0].medians), copy_best = schedules[0].best;
  for (const Schedule& s : schedules) {
    const double m = Median(s.medians);
    std::printf("  %-16s median of round medians %7.3f ms (copy's %3.0f%%), rounds %.3f-%.3f, best %.3f ms (copy's %3.0f%%)\n",
                s.name.c_str(), m * 1e3, 100 * copy_median / m, *std::min_element(s.medians.begin(), s.medians.end()) * 1e3,
                *std::max_element(s.medians.begin(), s.medians.end()) * 1e3, s.best * 1e3, 100 * copy_best / s.best);
  }
  // One thread: x's lines in address order, one 16-channel block's lines (64 bytes of each row),
  // and every block's lines, one block after another: the same lines as in order.
  const int64_t row_bytes = C * 4, lines = R * row_bytes / 64;
  // Each sweep repeated on its own, so that lines a cache holds are found there the next time.
  double in_order = 1e9, one_block = 1e9, contiguous = 1e9, all_blocks = 1e9;
  for (int r = 0; r < rounds * 4; ++r) in_order = std::min(in_order, SweepLines(0, lines, 64));
  for (int r = 0; r < rounds * 4; ++r) one_block = std::min(one_block, SweepLines(0, R, row_bytes));
  for (int r = 0; r < rounds * 4; ++r) contiguous = std::min(contiguous, SweepLines(0, R, 64));
  double padded = 1e9;
  for (int r = 0; r < rounds * 4; ++r) padded = std::min(padded, SweepLines(0, R, row_bytes + 64));
  for (int r = 0; r < rounds * 4; ++r) {
    double t = 0;
    for (int64_t b = 0; b < row_bytes / 64; ++b) t += SweepLines(64 * b, R, row_bytes);
    all_blocks = std::min(all_blocks, t);
  }
  double passes[3] = {1e9, 1e9, 1e9};
  for (int r = 0; r < rounds * 4; ++r) {
    for (int k = 0; k < 3; ++k) passes[k] = std::min(passes[k], Pass(k));
  }
  std::printf("one thread, best of %d passes each:\n", rounds * 4);
  auto line = [](const std::string& what, double seconds, const std::string& rate) {
    std::printf("  %-50s %.3f ms (%s)\n", what.c_str(), seconds * 1e3, rate.c_str());
  };
  auto gbps = [](double bytes, double seconds) { return std::to_string(static_cast<int>(bytes / seconds / 1e9)) + " GB/s"; };
  const std::string n = std::to_string(R);
  const double mb2 = 2.0 * R * C * 4;
  line("read x and dy", passes[0], gbps(mb2, passes[0]));
  line("write y and dx (streaming stores)", passes[1], gbps(mb2, passes[1]));
  line("copy x and dy into y and dx (streaming stores)", passes[2], gbps(2 * mb2, passes[2]));
  line("x's " + std::to_string(lines) + " lines in order", in_order, gbps(R * row_bytes, in_order));
  line("all " + std::to_string(row_bytes / 64) + " blocks in turn (each line once)", all_blocks,
       std::to_string(all_blocks / in_order).substr(0, 4) + "x in order");
  line("one block's " + n + " lines, " + std::to_string(row_bytes) + " bytes apart, again", one_block, gbps(R * 64, one_block));
  line("as many lines " + std::to_string(row_bytes + 64) + " bytes apart, again", padded, gbps(R * 64, padded));
  line("as many lines in a row, again", contiguous, gbps(R * 64, contiguous));
  return 0;
}

#endif  // __AVX512F__

}  // namespace

int main(int argc, char** argv) {
#ifdef __AVX512F__
  return Run(argc, argv);
#else
  (void)argc;
  (void)argv;
  std::fprintf(stderr, "batch_norm_schedules: built without AVX-512, nothing to measure\n");
  return 77;
#endif
}
