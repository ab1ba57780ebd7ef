// What this machine can do, measured, as JSON: the roofline every workload of
// tests/bench/codegen_vs_xla.py is reported against. The bandwidth and FLOP/s figures are
// profiler/machine_limits.h's (the same kernels --xla_hlo_profile holds its rows to); the
// oneDNN figures are this program's.
//
//   - memory: STREAM's copy (a[i] = b[i]) and triad (a[i] = b[i] + s * c[i]) on arrays four
//     times the last-level cache, on one thread and on all, counted as STREAM counts them (the
//     bytes named in the loop, no write-allocate), best of several repetitions;
//   - caches: the same kernels and a read-only sum over working sets from a fraction of L1 to
//     eight times the last-level cache, on all threads, so that a kernel whose working set fits in a
//     cache is held to that cache's bandwidth, never to memory's (its percentage cannot pass 100);
//   - peak f32 FLOP/s: fused multiply-adds on the widest vector unit the CPU has, with enough
//     independent accumulators to cover the FMA latency, on one core and on all;
//   - oneDNN standalone: each matrix product and convolution given on the command line, or found
//     in the HLO modules given, as one oneDNN primitive on its preferred layouts (weights
//     reordered once, before timing), created once, best of N executions on oneDNN's own threads
//     (a convolution: each implementation oneDNN offers for it, the fastest holding, as xlens
//     times oneDNN's first few when it compiles one);
//     a product's weights of 2 MiB or more on huge pages and again on 4 KiB pages (TimeMatmul);
//     a product whose output a constant mask partly discards (causal attention's scores) also as
//     the blocks of it the mask keeps, and one whose lhs such a mask makes zero along part of its
//     contraction (the softmax of those scores, times the values) also as the blocks of rows
//     contracted only where it can be nonzero (batched, and as a part per batch element on each
//     thread, as xlens runs them); the fastest holds;
//   - the rest of a module with products or convolutions as oneDNN's primitives (ModuleParts):
//     each softmax or log-softmax over rows, each other reduction, each weight update p - c g,
//     with the operations each covers and the bytes it moves;
//   - in each module, JAX's erfc spelled out (ErfcExpansions), which xlens computes as one erfc;
//   - transcendentals: oneDNN's eltwise exp, log, tanh, logistic, exact GELU (for erf) and sqrt
//     over a block that fits each core's L2, on all threads, in elements per second; and the
//     same functions as xlens emits them inline, each in a loop alone; the better of the two is
//     the function's rate.
//
// Usage: machine_limits [--threads=N] [--quick] [--repetitions=R]
//                       [--matmul=[B,]M,K,N]... [--conv=N,H,W,C,KH,KW,O[,stride[,pad[,groups]]]]...
//                       [--hlo=FILE]...
// --quick measures smaller arrays and fewer repetitions (a smoke run, not a measurement).
//
//        machine_limits --stream=BYTES [--threads=N] [--repetitions=R]
// measures copy, triad and the read-only sum over that one working set and nothing else, in
// a second or two, each kernel over at least 0.2 s of repetitions: a benchmark takes it right
// beside a workload, so that both meet the memory system in the same state (on a shared machine
// it changes from one minute to the next).
//
//        machine_limits --floors [--threads=N] [--repetitions=R] [--hlo=FILE]...
// measures the other floors the same way: the FMA peak on all threads, the modules' library
// calls and the transcendentals' rates (peak_f32, hlo_modules, transcendentals), nothing else.
//
//        machine_limits --calls [--hlo=FILE]...
// prints the modules' library calls as they would be timed (shapes, the share of a product or
// of its contraction a mask keeps), timing nothing, and the parts beside them (ModuleParts), each part's primitive
// run once, untimed, its result checked against the operations it stands for.
//
//        machine_limits --paired=FILE [--inputs=DIR] [--kernels=copy,triad,read] [--bytes=B]
//                       [--pairs=N] [--threads=N] [--library] [--xla_xlens_persistent_cache_dir=DIR]
// alternates one run of the module (compiled as `xlens run` compiles it, on its --inputs) with
// one pass of each kernel over the module's bytes (or B), N times (30), in this one process, and
// prints the per-pair ratios (paired_run.h). With --library, and no --kernels, the module's
// library calls run standalone take the kernels' place (LibraryPairedFloor). The cache directory
// is xlens run's flag: the kernels chosen by timing at compile time are the ones the benchmark's
// `xlens run` processes sharing it chose.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include <nlohmann/json.hpp>

#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/codegen/fast_math.h"
#include "compiler/support/large_allocation.h"
#include "profiler/machine_limits.h"
#include "tests/bench/paired_run.h"

#ifdef XLENS_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

#include "compiler/hlo/module.h"
#include "compiler/hlo/parser.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/erfc_expansion.h"
#include "compiler/passes/onednn_convolution.h"
#include "compiler/runtime/product_mask.h"
#include "compiler/support/file_io.h"
#endif

namespace {

using Json = nlohmann::json;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// The transcendental functions as xlens itself emits them (compiler/codegen/fast_math.h), each in
// a loop alone, compiled for this CPU: on this machine they can outrun oneDNN's eltwise kernels,
// and a floor must be the best that is measured, or a fusion would pass 100% of it.

using UnaryEmitter = xlens::codegen::UnaryF32Emitter;
using UnaryKernel = void (*)(const float*, float*, int64_t);

// The loop of `emit` alone (EmitUnaryF32Loop), compiled for this CPU.
UnaryKernel CompileLoop(xlens::codegen::CpuJit& jit, const std::string& name, UnaryEmitter emit) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>(name, *context);
  module->setTargetTriple(llvm::sys::getProcessTriple());
  xlens::codegen::EmitUnaryF32Loop(*module, name, emit);
  if (!jit.AddModule(std::move(module), std::move(context), /*keep_ir=*/false).ok()) return nullptr;
  auto address = jit.Lookup(name);
  return address.ok() ? reinterpret_cast<UnaryKernel>(*address) : nullptr;
}

// Arguments spread over [-8, 8) (log's over (0, 16)): no function takes a shortcut on them.
void FillArguments(float* in, int64_t elements, bool positive) {
  for (int64_t i = 0; i < elements; ++i) {
    in[i] = 16.0f * static_cast<float>((i * 7919) % 4096) / 4096.0f - 8.0f + (positive ? 8.0f + 1.0f / 1024 : 0.0f);
  }
}

// Elements per second of `kernel` on `threads` threads at once, each over its own block of
// `elements_per_thread` in cache: each thread's best of `executions` passes, summed.
double InlineRate(UnaryKernel kernel, bool positive, int threads, int executions, int64_t elements_per_thread) {
  std::vector<double> rates(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<float> in(elements_per_thread), out(elements_per_thread);
      FillArguments(in.data(), elements_per_thread, positive);
      kernel(in.data(), out.data(), elements_per_thread);
      double best = 1e30;
      const int64_t began = NowNs();
      for (int i = 0; i < executions || (i < 50 * executions && NowNs() - began < 200'000'000); ++i) {
        const int64_t start = NowNs();
        kernel(in.data(), out.data(), elements_per_thread);
        best = std::min(best, (NowNs() - start) * 1e-9);
      }
      rates[t] = elements_per_thread / best;
    });
  }
  for (std::thread& w : workers) w.join();
  double sum = 0;
  for (double r : rates) sum += r;
  return sum;
}

// Keyed as roofline.py keys them; gelu_erf is x / 2 (1 + erf(x / sqrt 2)), as oneDNN's, which
// xlens computes as x / 2 erfc(-x / sqrt 2) whether it meets it in that form (TensorFlow's) or
// as JAX spells it out (codegen/erfc_expansion.h).
Json InlineTranscendentalRates(int threads, int executions, int64_t elements_per_thread) {
  namespace cg = xlens::codegen;
  const std::pair<const char*, UnaryEmitter> functions[] = {
      {"exp", +[](llvm::IRBuilder<>& b, llvm::Value* x) { return cg::EmitFastExpF32(b, x); }},
      {"log", cg::EmitFastLogF32},
      {"tanh", cg::EmitFastTanhF32},
      {"logistic", cg::EmitFastLogisticF32},
      {"gelu_erf",
       +[](llvm::IRBuilder<>& b, llvm::Value* x) {
         llvm::Value* half = b.CreateFMul(x, llvm::ConstantFP::get(b.getFloatTy(), 0.5));
         llvm::Value* e = cg::EmitFastErfcF32(b, b.CreateFMul(x, llvm::ConstantFP::get(b.getFloatTy(), -M_SQRT1_2)));
         return b.CreateFMul(half, e);
       }},
      {"sqrt", +[](llvm::IRBuilder<>& b, llvm::Value* x) -> llvm::Value* {
         return b.CreateIntrinsic(llvm::Intrinsic::sqrt, {b.getFloatTy()}, {x});
       }}};
  Json out = Json::object();
  auto jit = xlens::codegen::CpuJit::Create();
  if (!jit.ok()) return out;
  for (const auto& [name, emit] : functions) {
    UnaryKernel kernel = CompileLoop(**jit, std::string("inline_") + name, emit);
    if (kernel == nullptr) continue;
    const bool positive = std::string(name) == "log" || std::string(name) == "sqrt";
    out[name] = {{"function", name}, {"impl", "xlens inline"},
                 {"elements_per_second", InlineRate(kernel, positive, threads, executions, elements_per_thread)}};
  }
  return out;
}

#ifdef XLENS_HAVE_ONEDNN
// ---------------------------------------------------------------------------------------------
// oneDNN standalone: one primitive per shape on oneDNN's own threads (OpenMP, every core), its
// preferred layouts (activations channels-last as xlens hands them over, weights in the blocked
// layout oneDNN picks, reordered before timing), created once; the best of `executions`.

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

struct FreeBuffer {
  void operator()(void* p) const { std::free(p); }
};
using KeptBuffers = std::vector<std::unique_ptr<void, FreeBuffer>>;

// An operand on the pages a compiled module's arena has (AllocateLarge: huge pages from 2 MiB),
// so that oneDNN run standalone reads and writes memory as it does inside xlens; `kept` owns it.
// With `small_pages`, on 4 KiB pages (KeepOnSmallPages before its first touch), as the arena
// keeps a small product's column-blocked weights (OneDnnThunk::ColumnBlockWeightsSlot).
dnnl::memory Filled(const dnnl::memory::desc& md, KeptBuffers& kept, bool small_pages = false) {
  void* data = xlens::AllocateLarge(md.get_size());
  if (data == nullptr) throw std::bad_alloc();
  kept.emplace_back(data);
  if (small_pages) xlens::KeepOnSmallPages(data, md.get_size());
  dnnl::memory m(md, Engine(), data);
  float* p = static_cast<float*>(m.get_data_handle());
  const size_t n = md.get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = 0.001f * static_cast<float>(i % 997) - 0.5f;
  return m;
}

// How long BestSequenceMs goes on sampling past its `executions`: 0.2 s for a floor, none for
// the floor `--paired --library` times right after each of the module's runs (its moment is the
// point, and the pair's run is a single run).
int64_t sampling_ns = 200'000'000;

// The best of at least `executions` runs of `run` (ms), and of more while they take under
// sampling_ns in all, up to 50 times as many; `run` once before, untimed (first touch, oneDNN's
// one-time setup).
template <typename Run>
double BestRunMs(const Run& run, int executions) {
  run();
  double best = 1e30;
  const int64_t began = NowNs();
  for (int i = 0; i < executions || (i < 50 * executions && NowNs() - began < sampling_ns); ++i) {
    const int64_t start = NowNs();
    run();
    best = std::min(best, (NowNs() - start) / 1e6);
  }
  return best;
}

// The best of at least `executions` runs of every primitive in `calls` one after the other (one
// primitive, or the blocks of one product), and of more while they take under 0.2 s in all, up to
// 50 times as many: a short call on a busy machine needs many tries to meet a quiet moment.
using PrimitiveCalls = std::vector<std::pair<dnnl::primitive, std::unordered_map<int, dnnl::memory>>>;
double BestSequenceMs(const PrimitiveCalls& calls, int executions) {
  dnnl::stream stream(Engine());
  auto run = [&] {
    for (const auto& [primitive, args] : calls) primitive.execute(stream, args);
    stream.wait();
  };
  return BestRunMs(run, executions);
}

double BestMs(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args,
              int executions) {
  return BestSequenceMs({{primitive, args}}, executions);
}

// oneDNN fixes a primitive's OpenMP team when the primitive is made; `make_and_time(threads)` is
// run with OpenMP offering one thread and then every thread, and the faster is oneDNN's time (a
// small product is often faster on one thread than across a team that waits for a busy core).
template <typename MakeAndTime>
Json BestOverThreads(MakeAndTime make_and_time) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  const int all = omp_get_max_threads();
  std::vector<int> counts = all > 1 ? std::vector<int>{1, all} : std::vector<int>{1};
#else
  const int all = 1;
  std::vector<int> counts{all};
#endif
  Json best;
  for (int threads : counts) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    omp_set_num_threads(threads);
#endif
    Json timed = make_and_time();
    timed["threads"] = threads;
    if (best.is_null() || timed["ms"].get<double>() < best["ms"].get<double>()) best = timed;
  }
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(all);
#endif
  return best;
}

Json TimeMatmulOnce(int64_t batch, int64_t m, int64_t k, int64_t n, int executions, bool small_page_weights) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc src({batch, m, k}, dt::f32, tag::abc), weights({batch, k, n}, dt::f32, tag::abc),
      dst({batch, m, n}, dt::f32, tag::abc);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), Engine());
  KeptBuffers kept;
  const std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, Filled(src, kept)},
      {DNNL_ARG_WEIGHTS, Filled(weights, kept, small_page_weights)},
      {DNNL_ARG_DST, Filled(dst, kept)}};
  const double ms = BestMs(dnnl::matmul(pd), args, executions);
  const double flops = 2.0 * batch * m * k * n;
  return {{"kind", "matmul"},
          {"shape", std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n)},
          {"flops", flops}, {"ms", ms}, {"gflops", flops / (ms * 1e6)}, {"impl", pd.impl_info_str()},
          {"weights_pages", small_page_weights ? "4k" : "2m"}};
}

// The faster of the weights on the arena's huge pages and on 4 KiB pages, where they are large
// enough to get huge pages at all. On one 2 MiB page a column block of weights whose rows lie a
// multiple of 4 KiB apart falls into a few cache sets, and whether gemm:jit meets that depends on
// the physical pages a process gets: the LSTM step's 64x512x2048 on one thread, best of 400, ran
// 0.77-1.38 ms on huge pages and 0.77-0.90 on 4 KiB ones over 6 processes (dc8076f), and xlens
// keeps such weights on 4 KiB pages, so a floor timed on huge pages alone was whichever a
// process drew (the LSTM step read 101-107% of it).
Json TimeMatmul(int64_t batch, int64_t m, int64_t k, int64_t n, int executions) {
  const bool both = static_cast<size_t>(batch * k * n) * sizeof(float) >= xlens::kHugePageBytes;
  return BestOverThreads([&] {
    Json best = TimeMatmulOnce(batch, m, k, n, executions, /*small_page_weights=*/false);
    if (both) {
      Json small = TimeMatmulOnce(batch, m, k, n, executions, /*small_page_weights=*/true);
      const double other_ms = std::max(small["ms"].get<double>(), best["ms"].get<double>());
      if (small["ms"].get<double>() < best["ms"].get<double>()) best = small;
      best["other_pages_ms"] = other_ms;
    }
    return best;
  });
}

// ---------------------------------------------------------------------------------------------
// Scores a mask discards. Causal attention computes q.k for every query and key and then keeps
// only the keys at or before each query (jnp.tril's select(compare(iota, iota), s, -1e9)): the
// other half of the product is never read, and xlens computes only the blocks of rows and columns
// the select keeps (runtime/product_mask.h). oneDNN's floor for that work is the kept share alone:
// the product split into blocks of query rows, each against the keys its rows keep.

// For a product [batch..., m, n] (row-major), the columns of each of its m rows that the module
// ever reads, the same for every batch element: its value may pass through elementwise operations
// (the 1/sqrt(d) scale) to selects, and each select reads only the positions it takes from it by
// the runtime's rule (runtime::SelectedPositions), so that the floor keeps the scores xlens keeps.
// nullopt where every position may be read (any other use, a condition the rule does not work
// out). Calls are inlined beforehand.
std::optional<std::vector<xlens::runtime::ColumnRange>> ReadColumnsPerRow(const xlens::HloInstruction& product) {
  const xlens::Shape& shape = product.shape();
  std::optional<xlens::runtime::SelectedPositions> read = xlens::runtime::SelectedPositions::For(shape);
  if (!read) return std::nullopt;
  // Instructions that hold the product's values, position for position.
  std::vector<const xlens::HloInstruction*> carriers{&product};
  std::set<const xlens::HloInstruction*> seen{&product};
  while (!carriers.empty()) {
    const xlens::HloInstruction* carrier = carriers.back();
    carriers.pop_back();
    if (carrier == carrier->parent()->root_instruction() || carrier->users().empty()) return std::nullopt;
    for (const xlens::HloInstruction* user : carrier->users()) {
      if (!user->IsElementwise() || !user->shape().IsArray() || user->shape().dimensions() != shape.dimensions()) {
        return std::nullopt;
      }
      const bool branch = user->opcode() == xlens::HloOpcode::kSelect && user->operand(0) != carrier &&
                          user->operand(1) != user->operand(2);
      if (!branch) {
        if (seen.insert(user).second) carriers.push_back(user);
      } else if (!read->AddSelect(*user, *carrier)) {
        return std::nullopt;
      }
    }
  }
  if (read->empty()) return std::nullopt;
  return read->ColumnsPerRow();
}

// Rows [row, row + rows) against columns [column, column + columns) of an [m, n] product.
struct KeptBlock {
  int64_t row = 0, rows = 0, column = 0, columns = 0;
};

// Blocks of `rows_per_block` rows, each against the columns its rows read.
std::vector<KeptBlock> KeptBlocks(int64_t m, int64_t n, const std::vector<xlens::runtime::ColumnRange>& columns,
                                  int64_t rows_per_block) {
  std::vector<KeptBlock> blocks;
  for (int64_t r0 = 0; r0 < m; r0 += rows_per_block) {
    const int64_t rows = std::min(rows_per_block, m - r0);
    int64_t begin = n, end = 0;
    for (int64_t r = r0; r < r0 + rows; ++r) {
      if (columns[r].begin >= columns[r].end) continue;
      begin = std::min(begin, columns[r].begin);
      end = std::max(end, columns[r].end);
    }
    if (begin < end) blocks.push_back({r0, rows, begin, end - begin});
  }
  return blocks;
}

// The share of an [m, n] product's multiply-adds that `blocks` compute.
double KeptShare(int64_t m, int64_t n, const std::vector<KeptBlock>& blocks) {
  double kept = 0;
  for (const KeptBlock& b : blocks) kept += static_cast<double>(b.rows) * b.columns;
  return kept / (static_cast<double>(m) * n);
}

// The product [batch, m, k] x [batch, k, n] computed in `blocks` alone. The rows of q are read
// and the scores written in place ([m, k] and [m, n] row-major, as in the module); each block's
// keys are in the layout oneDNN prefers, reordered before timing as every weight here (the keys'
// own [n, k] rows measured 0.73-0.78 ms against 0.71-0.76 for 8x512x64x512 with a causal mask in
// blocks of 64 rows, both gemm:jit).
Json TimeKeptMatmulOnce(int64_t batch, int64_t m, int64_t k, int64_t n, const std::vector<KeptBlock>& blocks,
                        int executions) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  KeptBuffers kept;
  const dnnl::memory q = Filled(dnnl::memory::desc({batch, m, k}, dt::f32, dims{m * k, k, 1}), kept);
  const dnnl::memory scores = Filled(dnnl::memory::desc({batch, m, n}, dt::f32, dims{m * n, n, 1}), kept);
  auto at = [](const dnnl::memory& whole, int64_t offset) {
    return static_cast<float*>(whole.get_data_handle()) + offset;
  };
  PrimitiveCalls calls;
  std::string impl;
  for (const KeptBlock& b : blocks) {
    const dnnl::memory::desc src({batch, b.rows, k}, dt::f32, dims{m * k, k, 1});
    const dnnl::memory::desc weights({batch, k, b.columns}, dt::f32, dnnl::memory::format_tag::any);
    const dnnl::memory::desc dst({batch, b.rows, b.columns}, dt::f32, dims{m * n, n, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), Engine());
    impl = pd.impl_info_str();
    calls.push_back({dnnl::matmul(pd),
                     {{DNNL_ARG_SRC, dnnl::memory(src, Engine(), at(q, b.row * k))},
                      {DNNL_ARG_WEIGHTS, Filled(pd.weights_desc(), kept)},
                      {DNNL_ARG_DST, dnnl::memory(dst, Engine(), at(scores, b.row * n + b.column))}}});
  }
  const double ms = BestSequenceMs(calls, executions);
  // `flops` stays the whole product's, as for the full product's timing, so that a rate over it
  // does not depend on which of the two timed faster; `kept_flops` is the work oneDNN did here.
  const double flops = 2.0 * batch * m * k * n;
  const double kept_flops = flops * KeptShare(m, n, blocks);
  return {{"kind", "matmul"},
          {"shape", std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" +
                        std::to_string(n)},
          {"kept_share", KeptShare(m, n, blocks)},
          {"flops", flops},
          {"kept_flops", kept_flops},
          {"ms", ms},
          {"gflops", kept_flops / (ms * 1e6)},
          {"impl", impl}};
}

// ---------------------------------------------------------------------------------------------
// A contraction a mask makes partly zero. Softmax over the masked scores gives each masked column
// of row r one value, exp(-1e9 - max_r) / sum_r, which is 0 unless the row's every score is near
// -1e9; xlens then contracts probabilities @ values, per block of 64 rows, only up to the block's
// last column where the probabilities can be nonzero (runtime/onednn_masked_contraction.cc,
// after checking those terms are zero at run time). oneDNN's floor for that work is the same
// blocks alone: each block of rows against the first rows of the values it contracts over.

bool RowMajor(const xlens::Shape& shape) {
  return !shape.has_layout() || shape.layout().minor_to_major == xlens::shape_util::DefaultMinorToMajor(shape.rank());
}

// `impl` with `name` added ("gemm:jit+brg:avx512_core"): a short block of the contraction takes
// another kernel than a block over all of it.
void AddImpl(std::string& impl, const std::string& name) {
  if (("+" + impl + "+").find("+" + name + "+") == std::string::npos) impl += (impl.empty() ? "" : "+") + name;
}

// Rows [row, row + rows) of an [m, k] x [k, n] product contracted over [0, k_end) alone.
struct ContractionBlock {
  int64_t row = 0, rows = 0, k_end = 0;
};

// Blocks of `rows_per_block` rows, each contracted up to the last column where its rows' lhs can
// be nonzero, rounded up to 16 as the thunk rounds it (kContractionAlign). Empty where the thunk
// would contract the whole product: over 3/4 of it kept.
std::vector<ContractionBlock> ContractionBlocks(int64_t m, int64_t k,
                                                const std::vector<xlens::runtime::ColumnRange>& columns,
                                                int64_t rows_per_block) {
  constexpr int64_t kAlign = 16;
  std::vector<ContractionBlock> blocks;
  int64_t computed = 0;
  for (int64_t r0 = 0; r0 < m; r0 += rows_per_block) {
    const int64_t rows = std::min(rows_per_block, m - r0);
    int64_t end = 0;
    for (int64_t r = r0; r < r0 + rows; ++r) end = std::max(end, columns[r].end);
    end = std::min(k, std::max(kAlign, (end + kAlign - 1) / kAlign * kAlign));
    blocks.push_back({r0, rows, end});
    computed += rows * end;
  }
  if (4 * computed > 3 * m * k) return {};
  return blocks;
}

// The share of an [m, k] x [k, n] product's multiply-adds that `blocks` compute.
double ContractedShare(int64_t m, int64_t k, const std::vector<ContractionBlock>& blocks) {
  double kept = 0;
  for (const ContractionBlock& b : blocks) kept += static_cast<double>(b.rows) * b.k_end;
  return kept / (static_cast<double>(m) * k);
}

// The product [batch, m, k] x [batch, k, n] computed in `blocks` alone: each block's rows of the
// lhs read in place ([m, k] row-major, as in the module), the values' first k_end rows in the
// layout oneDNN prefers (reordered before timing, as every weight here), each block's output rows
// written in place.
Json TimeContractedMatmulOnce(int64_t batch, int64_t m, int64_t k, int64_t n,
                              const std::vector<ContractionBlock>& blocks, int executions) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  KeptBuffers kept;
  const dnnl::memory lhs = Filled(dnnl::memory::desc({batch, m, k}, dt::f32, dims{m * k, k, 1}), kept);
  const dnnl::memory out = Filled(dnnl::memory::desc({batch, m, n}, dt::f32, dims{m * n, n, 1}), kept);
  auto at = [](const dnnl::memory& whole, int64_t offset) {
    return static_cast<float*>(whole.get_data_handle()) + offset;
  };
  PrimitiveCalls calls;
  std::string impl;
  for (const ContractionBlock& b : blocks) {
    const dnnl::memory::desc src({batch, b.rows, b.k_end}, dt::f32, dims{m * k, k, 1});
    const dnnl::memory::desc weights({batch, b.k_end, n}, dt::f32, dnnl::memory::format_tag::any);
    const dnnl::memory::desc dst({batch, b.rows, n}, dt::f32, dims{m * n, n, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), Engine());
    AddImpl(impl, pd.impl_info_str());
    calls.push_back({dnnl::matmul(pd),
                     {{DNNL_ARG_SRC, dnnl::memory(src, Engine(), at(lhs, b.row * k))},
                      {DNNL_ARG_WEIGHTS, Filled(pd.weights_desc(), kept)},
                      {DNNL_ARG_DST, dnnl::memory(dst, Engine(), at(out, b.row * n))}}});
  }
  const double ms = BestSequenceMs(calls, executions);
  // As TimeKeptMatmulOnce: `flops` the whole product's, `kept_flops` what oneDNN did here.
  const double flops = 2.0 * batch * m * k * n;
  const double share = ContractedShare(m, k, blocks);
  return {{"kind", "matmul"},
          {"shape", std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" +
                        std::to_string(n)},
          {"kept_share", share},
          {"kept_of", "contraction"},
          {"flops", flops},
          {"kept_flops", flops * share},
          {"ms", ms},
          {"gflops", flops * share / (ms * 1e6)},
          {"impl", impl}};
}

// The same blocks as a part per batch element, as xlens runs them: each of the machine's threads
// takes every T-th batch element and runs its blocks one after the other, each a 2-d primitive made
// for one OpenMP thread, the values read in place ([k, n] row-major). oneDNN's batched primitive
// above splits every block's call across the threads and waits at its end.
Json TimeContractedMatmulPerBatchOnce(int64_t batch, int64_t m, int64_t k, int64_t n,
                                      const std::vector<ContractionBlock>& blocks, int executions) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
#else
  const int threads = 1;
#endif
  KeptBuffers kept;
  const dnnl::memory lhs = Filled(dnnl::memory::desc({batch, m, k}, dt::f32, dims{m * k, k, 1}), kept);
  const dnnl::memory values = Filled(dnnl::memory::desc({batch, k, n}, dt::f32, dims{k * n, n, 1}), kept);
  const dnnl::memory out = Filled(dnnl::memory::desc({batch, m, n}, dt::f32, dims{m * n, n, 1}), kept);
  auto at = [](const dnnl::memory& whole, int64_t offset) {
    return static_cast<float*>(whole.get_data_handle()) + offset;
  };
  std::map<std::pair<int64_t, int64_t>, dnnl::matmul> made;  // by rows and k_end
  std::vector<PrimitiveCalls> per_batch(batch);
  std::string impl;
  for (const ContractionBlock& b : blocks) {
    const dnnl::memory::desc src({b.rows, b.k_end}, dt::f32, dims{k, 1});
    const dnnl::memory::desc weights({b.k_end, n}, dt::f32, dims{n, 1});
    const dnnl::memory::desc dst({b.rows, n}, dt::f32, dims{n, 1});
    auto it = made.find({b.rows, b.k_end});
    if (it == made.end()) {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), Engine());
      AddImpl(impl, pd.impl_info_str());
      it = made.emplace(std::make_pair(b.rows, b.k_end), dnnl::matmul(pd)).first;
    }
    for (int64_t e = 0; e < batch; ++e) {
      per_batch[e].push_back({it->second,
                              {{DNNL_ARG_SRC, dnnl::memory(src, Engine(), at(lhs, e * m * k + b.row * k))},
                               {DNNL_ARG_WEIGHTS, dnnl::memory(weights, Engine(), at(values, e * k * n))},
                               {DNNL_ARG_DST, dnnl::memory(dst, Engine(), at(out, e * m * n + b.row * n))}}});
    }
  }
  // Workers held between runs at a barrier: a run is the span from one barrier to the next.
  std::barrier start(threads), done(threads);
  std::atomic<bool> stop{false};
  auto work = [&](int t) {
    dnnl::stream stream(Engine());
    for (int64_t e = t; e < batch; e += threads) {
      for (const auto& [primitive, args] : per_batch[e]) primitive.execute(stream, args);
    }
    stream.wait();
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
      omp_set_num_threads(1);
#endif
      for (;;) {
        start.arrive_and_wait();
        if (stop) return;
        work(t);
        done.arrive_and_wait();
      }
    });
  }
  auto run = [&] {
    start.arrive_and_wait();
    work(0);
    done.arrive_and_wait();
  };
  const double best = BestRunMs(run, executions);
  stop = true;
  start.arrive_and_wait();
  for (std::thread& w : workers) w.join();
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(threads);
#endif
  const double flops = 2.0 * batch * m * k * n;
  const double share = ContractedShare(m, k, blocks);
  return {{"kind", "matmul"},
          {"shape", std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" +
                        std::to_string(n)},
          {"kept_share", share},
          {"kept_of", "contraction"},
          {"parts", "batch"},
          {"flops", flops},
          {"kept_flops", flops * share},
          {"ms", best},
          {"gflops", flops * share / (best * 1e6)},
          {"impl", impl},
          {"threads", threads}};
}

// oneDNN's fastest implementation of a primitive: each one it offers for the descriptor of `pd`
// (its reference kernels aside, unless it offers nothing else) made and timed, the best kept
// (`*ms`, `*impl`), beside its first pick's (`*first_ms`, `*first_impl`), which is what a
// primitive made the plain way runs. Its first pick is not always its fastest: small-channel
// convolutions on this machine took brgconv 50.7 us where jit:avx512_core took 22.3. xlens
// times oneDNN's first few implementations for a convolution when it compiles one
// (onednn_convolution_thunks.cc) and keeps the fastest, so a floor of the first pick alone would
// be a bound that xlens beats. `args_for(pd, kept)` gives the arguments of the implementation
// `pd` is on (its weights in that implementation's layout).
template <typename Primitive, typename PrimitiveDesc, typename ArgsFor>
void TimeEachImplementation(PrimitiveDesc pd, const ArgsFor& args_for, int executions, double* ms,
                            std::string* impl, double* first_ms, std::string* first_impl) {
  *ms = 0;
  impl->clear();
  do {
    const std::string name = pd.impl_info_str();
    if (!impl->empty() && name.rfind("ref", 0) == 0) continue;
    KeptBuffers kept;
    const double t = BestMs(Primitive(pd), args_for(pd, kept), executions);
    if (first_impl->empty()) {
      *first_impl = name;
      *first_ms = t;
    }
    if (impl->empty() || t < *ms) {
      *ms = t;
      *impl = name;
    }
  } while (pd.next_impl());
}

struct ConvShape {
  std::string kind;  // forward, backward_data, backward_weights
  int64_t images = 0, input_channels = 0, output_channels = 0, groups = 1;
  std::vector<int64_t> src_spatial, dst_spatial, kernel_spatial, strides, dilations, padding_low, padding_high;
};

Json TimeConvolutionOnce(const ConvShape& s, int executions) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  auto channels_last = [](int64_t images, int64_t channels, const std::vector<int64_t>& spatial) {
    dims d{images, channels};
    d.insert(d.end(), spatial.begin(), spatial.end());
    return dnnl::memory::desc(d, dt::f32, d.size() == 3 ? tag::nwc : d.size() == 4 ? tag::nhwc : tag::ndhwc);
  };
  const dnnl::memory::desc src = channels_last(s.images, s.input_channels, s.src_spatial);
  const dnnl::memory::desc dst = channels_last(s.images, s.output_channels, s.dst_spatial);
  dims w = s.groups > 1 ? dims{s.groups, s.output_channels / s.groups, s.input_channels / s.groups}
                        : dims{s.output_channels, s.input_channels};
  w.insert(w.end(), s.kernel_spatial.begin(), s.kernel_spatial.end());
  const dnnl::memory::desc any_weights(w, dt::f32, tag::any);
  const dims strides(s.strides.begin(), s.strides.end()), dilates(s.dilations.begin(), s.dilations.end()),
      pl(s.padding_low.begin(), s.padding_low.end()), ph(s.padding_high.begin(), s.padding_high.end());
  auto forward = [&](dnnl::prop_kind prop) {
    return dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src, any_weights, dst,
                                           strides, dilates, pl, ph);
  };
  double flops = 2.0 * s.images * s.output_channels * (s.input_channels / s.groups);
  for (int64_t d : s.dst_spatial) flops *= d;
  for (int64_t d : s.kernel_spatial) flops *= d;
  double ms = 0;
  std::string impl, first_impl;
  double first_ms = 0;
  // Each descriptor is named: oneDNN's iterator over implementations reads it on each next_impl().
  if (s.kind == "forward") {
    const dnnl::convolution_forward::desc desc = forward(dnnl::prop_kind::forward_inference);
    TimeEachImplementation<dnnl::convolution_forward>(
        dnnl::convolution_forward::primitive_desc(desc, Engine()),
        [&](const dnnl::convolution_forward::primitive_desc& pd, KeptBuffers& kept) {
          return std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, Filled(src, kept)},
                                                       {DNNL_ARG_WEIGHTS, Filled(pd.weights_desc(), kept)},
                                                       {DNNL_ARG_DST, Filled(dst, kept)}};
        },
        executions, &ms, &impl, &first_ms, &first_impl);
  } else {
    const dnnl::convolution_forward::desc hint_desc = forward(dnnl::prop_kind::forward_training);
    const dnnl::convolution_forward::primitive_desc hint(hint_desc, Engine());
    if (s.kind == "backward_data") {
      const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, src, any_weights, dst,
                                                       strides, dilates, pl, ph);
      TimeEachImplementation<dnnl::convolution_backward_data>(
          dnnl::convolution_backward_data::primitive_desc(desc, Engine(), hint),
          [&](const dnnl::convolution_backward_data::primitive_desc& pd, KeptBuffers& kept) {
            return std::unordered_map<int, dnnl::memory>{{DNNL_ARG_DIFF_SRC, Filled(src, kept)},
                                                         {DNNL_ARG_WEIGHTS, Filled(pd.weights_desc(), kept)},
                                                         {DNNL_ARG_DIFF_DST, Filled(dst, kept)}};
          },
          executions, &ms, &impl, &first_ms, &first_impl);
    } else {
      const dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, src, any_weights,
                                                          dst, strides, dilates, pl, ph);
      TimeEachImplementation<dnnl::convolution_backward_weights>(
          dnnl::convolution_backward_weights::primitive_desc(desc, Engine(), hint),
          [&](const dnnl::convolution_backward_weights::primitive_desc& pd, KeptBuffers& kept) {
            return std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, Filled(src, kept)},
                                                         {DNNL_ARG_DIFF_WEIGHTS, Filled(pd.diff_weights_desc(), kept)},
                                                         {DNNL_ARG_DIFF_DST, Filled(dst, kept)}};
          },
          executions, &ms, &impl, &first_ms, &first_impl);
    }
  }
  auto join = [](const std::vector<int64_t>& v) {
    std::string out;
    for (int64_t x : v) out += (out.empty() ? "" : "x") + std::to_string(x);
    return out;
  };
  return {{"kind", "convolution_" + s.kind},
          {"shape", "N" + std::to_string(s.images) + " C" + std::to_string(s.input_channels) + " " +
                        join(s.src_spatial) + " k" + join(s.kernel_spatial) + " O" + std::to_string(s.output_channels) +
                        " s" + join(s.strides) + (s.groups > 1 ? " g" + std::to_string(s.groups) : "")},
          {"flops", flops}, {"ms", ms}, {"gflops", flops / (ms * 1e6)}, {"impl", impl},
          {"first_impl", first_impl}, {"first_impl_ms", first_ms}};
}

Json TimeConvolution(const ConvShape& s, int executions) {
  return BestOverThreads([&] { return TimeConvolutionOnce(s, executions); });
}

// The transcendental functions on their own: oneDNN's eltwise primitive (its JIT kernels: range
// reduction, a polynomial and the exponent's bits, the best vector code for them on this
// machine) over a block that stays in the caches, src and dst apart, on all threads; elements
// per second, best of `executions`. A fusion that computes N of a function per element can at
// best spend N / rate seconds on them. erf has no primitive of its own here: oneDNN's exact GELU,
// x / 2 (1 + erf(x / sqrt 2)), is erf and three more operations.
Json TimeEltwiseOnce(const char* name, dnnl::algorithm algorithm, int executions, int64_t elements) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc md({elements}, dt::f32, tag::a);
  const dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithm, md, 0.f, 0.f), Engine());
  dnnl::memory src(md, Engine()), dst(md, Engine());
  FillArguments(static_cast<float*>(src.get_data_handle()), elements, algorithm == dnnl::algorithm::eltwise_log);
  const double ms = BestMs(dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, executions);
  return Json{{"function", name}, {"elements", elements}, {"ms", ms},
              {"elements_per_second", elements / (ms * 1e-3)}, {"impl", pd.impl_info_str()}};
}

// On all threads at once, and on one thread times the threads (each core's best, summed, as the
// inline loops and the FMA peak are counted: one call across both cores waits for the busier).
Json TimeEltwise(const char* name, dnnl::algorithm algorithm, int executions, int64_t elements_per_thread,
                 int threads) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  const int all = omp_get_max_threads();
  omp_set_num_threads(1);
  const Json one = TimeEltwiseOnce(name, algorithm, executions, elements_per_thread);
  omp_set_num_threads(all);
#else
  const Json one = TimeEltwiseOnce(name, algorithm, executions, elements_per_thread);
#endif
  Json out = TimeEltwiseOnce(name, algorithm, executions, elements_per_thread * threads);
  const double summed = one["elements_per_second"].get<double>() * threads;
  out["all_threads_elements_per_second"] = out["elements_per_second"];
  out["one_thread_elements_per_second"] = one["elements_per_second"];
  out["elements_per_second"] = std::max(out["elements_per_second"].get<double>(), summed);
  return out;
}

// Every function roofline.py holds a fusion to, keyed by its name there.
Json TranscendentalRates(int executions, int64_t elements_per_thread, int threads) {
  Json out = Json::object();
  const std::pair<const char*, dnnl::algorithm> functions[] = {
      {"exp", dnnl::algorithm::eltwise_exp},           {"log", dnnl::algorithm::eltwise_log},
      {"tanh", dnnl::algorithm::eltwise_tanh},         {"logistic", dnnl::algorithm::eltwise_logistic},
      {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf}, {"sqrt", dnnl::algorithm::eltwise_sqrt}};
  for (const auto& [name, algorithm] : functions) {
    try {
      out[name] = TimeEltwise(name, algorithm, executions, elements_per_thread, threads);
    } catch (const dnnl::error& e) {
      out[name] = {{"function", name}, {"refused", std::string("oneDNN: ") + e.what()}};
    }
  }
  return out;
}

int64_t Product(const xlens::Shape& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= shape.dimensions(d);
  return p;
}

// A convolution posed as the rewriter poses it (forward, backward data or backward weights,
// xlens/passes/onednn_convolution.h) or, where it refuses (grouped, other layouts), as the
// forward convolution its dimension numbers describe.
std::optional<ConvShape> PoseConvolution(const xlens::HloInstruction& conv, std::string* why) {
  using xlens::OneDnnConvolution;
  for (bool through : {true, false}) {
    const xlens::OneDnnOperandView lhs = through ? xlens::ViewThrough(*conv.operand(0), false)
                                                 : xlens::DirectView(*conv.operand(0));
    const xlens::OneDnnOperandView rhs = through ? xlens::ViewThrough(*conv.operand(1), true)
                                                 : xlens::DirectView(*conv.operand(1));
    if (std::optional<OneDnnConvolution> c = xlens::DescribeOneDnnConvolution(conv, lhs, rhs, why)) {
      ConvShape s;
      s.kind = c->kind == OneDnnConvolution::Kind::kForward        ? "forward"
               : c->kind == OneDnnConvolution::Kind::kBackwardData ? "backward_data"
                                                                   : "backward_weights";
      s.images = c->images;
      s.input_channels = c->input_channels;
      s.output_channels = c->output_channels;
      s.groups = c->groups;
      s.src_spatial = c->src_spatial;
      s.dst_spatial = c->dst_spatial;
      s.kernel_spatial = c->kernel_spatial;
      s.strides = c->strides;
      s.dilations = c->dilations;
      s.padding_low = c->padding_low;
      s.padding_high = c->padding_high;
      return s;
    }
  }
  if (!conv.convolution_dimension_numbers || !conv.window || conv.batch_group_count() != 1) return std::nullopt;
  const auto& dn = *conv.convolution_dimension_numbers;
  const xlens::Shape &lhs = conv.operand(0)->shape(), &rhs = conv.operand(1)->shape(), &out = conv.shape();
  ConvShape s;
  s.kind = "forward";
  s.groups = conv.feature_group_count();
  s.images = lhs.dimensions(dn.input_batch_dimension);
  s.input_channels = lhs.dimensions(dn.input_feature_dimension);
  s.output_channels = rhs.dimensions(dn.kernel_output_feature_dimension);
  for (size_t d = 0; d < dn.input_spatial_dimensions.size(); ++d) {
    const xlens::WindowDimension& w = conv.window->dimensions[d];
    if (w.base_dilation != 1 || w.padding_low < 0 || w.padding_high < 0) {
      *why = "neither a oneDNN pass nor a forward convolution";
      return std::nullopt;
    }
    s.src_spatial.push_back(lhs.dimensions(dn.input_spatial_dimensions[d]));
    s.kernel_spatial.push_back(rhs.dimensions(dn.kernel_spatial_dimensions[d]));
    s.dst_spatial.push_back(out.dimensions(dn.output_spatial_dimensions[d]));
    s.strides.push_back(w.stride);
    s.dilations.push_back(w.window_dilation - 1);
    s.padding_low.push_back(w.padding_low);
    s.padding_high.push_back(w.padding_high);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The rest of a module with products or convolutions, as a oneDNN program would run it: each
// softmax over a row (max, exp, sum and divide, or log-softmax's log and subtract) as oneDNN's
// softmax primitive, each other reduction as its reduction primitive, each weight update
// p - c g as its sum primitive with scales (1, -c). Its products' post-ops and the elementwise
// work no primitive here covers are left to roofline.py's arithmetic floor. Each part says
// which of the module's operations it covers, counted as roofline.hlo_costs counts them, and
// the bytes it must move, so that roofline.py holds it to the faster of oneDNN's primitive and
// its own bytes and arithmetic (oneDNN 2.6's softmax took 0.24 ms over attention_8x256x64's
// [2048, 256] scores, whose exps take 0.05 ms at the exp rate), and counts beside the parts
// only the arithmetic they leave.

bool Floating(const xlens::Shape& shape) {
  return shape.IsArray() && xlens::IsFloatingPointType(shape.element_type());
}

// Adds `i`'s cost to `costs` ({"flops": n, "transcendentals": {opcode: elements}}) as
// roofline.hlo_costs counts it: one flop per element of an elementwise arithmetic op (two for a
// clamp), each transcendental's elements apart, one flop per element a reduce reads.
void CountCost(const xlens::HloInstruction& i, Json& costs) {
  static const std::set<std::string_view> kFlop = {
      "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs", "sign",
      "compare", "select", "clamp", "floor", "ceil", "round-nearest-afz", "round-nearest-even"};
  static const std::set<std::string_view> kTranscendental = {
      "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "erf", "sqrt",
      "rsqrt", "power", "cbrt", "sine", "cosine", "tan", "atan2"};
  if (!i.shape().IsArray()) return;
  const std::string opcode(xlens::HloOpcodeString(i.opcode()));
  const double elements = static_cast<double>(i.shape().num_elements());
  if (kTranscendental.count(opcode) && Floating(i.shape())) {
    costs["transcendentals"][opcode] = costs["transcendentals"].value(opcode, 0.0) + elements;
  } else if (kFlop.count(opcode) && (Floating(i.shape()) || opcode == "compare")) {
    costs["flops"] = costs["flops"].get<double>() + elements * (opcode == "clamp" ? 2 : 1);
  } else if (i.opcode() == xlens::HloOpcode::kReduce && Floating(i.shape())) {
    costs["flops"] = costs["flops"].get<double>() + static_cast<double>(i.operand(0)->shape().num_elements());
  }
}

Json Costs(const std::vector<const xlens::HloInstruction*>& covered) {
  Json costs = {{"flops", 0.0}, {"transcendentals", Json::object()}};
  for (const xlens::HloInstruction* i : covered) CountCost(*i, costs);
  return costs;
}

// `i` without the reshapes, broadcasts and copies that carry a row's value to its elements.
const xlens::HloInstruction* Carried(const xlens::HloInstruction* i) {
  using xlens::HloOpcode;
  while (i->opcode() == HloOpcode::kReshape || i->opcode() == HloOpcode::kBroadcast ||
         i->opcode() == HloOpcode::kBitcast || i->opcode() == HloOpcode::kCopy) {
    i = i->operand(0);
  }
  return i;
}

// The reduction `reduce` applies with (add, maximum, ...), or nullopt where it is no single
// binary op of its two parameters.
std::optional<xlens::HloOpcode> Reducer(const xlens::HloInstruction& reduce) {
  if (reduce.opcode() != xlens::HloOpcode::kReduce || reduce.operand_count() != 2 || !reduce.to_apply()) {
    return std::nullopt;
  }
  const xlens::HloInstruction* root = reduce.to_apply()->root_instruction();
  if (root->operand_count() != 2 || root->operand(0)->opcode() != xlens::HloOpcode::kParameter ||
      root->operand(1)->opcode() != xlens::HloOpcode::kParameter) {
    return std::nullopt;
  }
  return root->opcode();
}

// Whether `reduce` reduces `operand` over its last dimension alone with `op`.
bool ReducesRows(const xlens::HloInstruction* reduce, xlens::HloOpcode op, const xlens::HloInstruction* operand) {
  return Reducer(*reduce) == op && reduce->operand(0) == operand && operand->shape().rank() >= 1 &&
         reduce->dimensions() == std::vector<int64_t>{operand->shape().rank() - 1};
}

struct Part {
  std::string kind;  // softmax, logsoftmax, reduction, sum
  std::string instruction;
  dnnl::memory::dims src, dst;  // a reduction's source and destination; the others' one shape
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float scale = 0;  // a sum's second scale
  std::vector<const xlens::HloInstruction*> covered;
  // A softmax over scores a compile-time mask sets to one value outside some columns of each row
  // (causal attention): the share of its elements that can differ from that value. xlens's
  // product computes only those scores, its row loop takes the exponential of the masked ones
  // once a row, and the product after it contracts only those columns, so the part's own floor
  // (its bytes and arithmetic) is that share of the whole; oneDNN's primitive runs over all.
  double kept_share = 1;
};

// exp(x - max(x)) over rows, its rows' sum, and where present the divide by it (softmax) or the
// log of it taken from x - max (log-softmax). A training step's jvp keeps exp and the sum for its
// backward without either: still a softmax's forward work.
std::optional<Part> MatchSoftmax(const xlens::HloInstruction& exp) {
  using xlens::HloOpcode;
  if (exp.opcode() != HloOpcode::kExp || !Floating(exp.shape())) return std::nullopt;
  const xlens::HloInstruction* shifted = exp.operand(0);
  if (shifted->opcode() != HloOpcode::kSubtract) return std::nullopt;
  const xlens::HloInstruction* x = shifted->operand(0);
  Part part;
  const xlens::HloInstruction* max = Carried(shifted->operand(1));
  // jax.nn.softmax's max(max(x), -inf), which keeps a row of -inf finite.
  if (max->opcode() == HloOpcode::kMaximum && Carried(max->operand(1))->opcode() == HloOpcode::kConstant) {
    part.covered.push_back(max);
    max = Carried(max->operand(0));
  }
  if (!ReducesRows(max, HloOpcode::kMaximum, x)) return std::nullopt;
  const xlens::HloInstruction* sum = nullptr;
  for (const xlens::HloInstruction* user : exp.users()) {
    if (ReducesRows(user, HloOpcode::kAdd, &exp)) sum = user;
  }
  if (sum == nullptr) return std::nullopt;
  part.kind = "softmax";
  part.algorithm = dnnl::algorithm::softmax_accurate;
  part.covered.insert(part.covered.end(), {max, shifted, &exp, sum});
  for (const xlens::HloInstruction* user : exp.users()) {
    if (user->opcode() == HloOpcode::kDivide && user->operand(0) == &exp && Carried(user->operand(1)) == sum) {
      part.covered.push_back(user);
    }
  }
  for (const xlens::HloInstruction* i : exp.parent()->instructions()) {
    if (i->opcode() != HloOpcode::kLog || Carried(i->operand(0)) != sum) continue;
    for (const xlens::HloInstruction* user : shifted->users()) {
      if (user->opcode() == HloOpcode::kSubtract && user->operand(0) == shifted && Carried(user->operand(1)) == i) {
        part.kind = "logsoftmax";
        part.algorithm = dnnl::algorithm::softmax_log;
        part.covered.insert(part.covered.end(), {i, user});
      }
    }
  }
  const int64_t columns = x->shape().dimensions(x->shape().rank() - 1);
  part.src = part.dst = {x->shape().num_elements() / columns, columns};
  part.instruction = exp.name();
  if (const auto varying = xlens::runtime::RowUniformOutsideColumnsOfValue(*x); varying && !varying->empty()) {
    int64_t kept = 0;
    for (const xlens::runtime::ColumnRange& range : *varying) kept += range.end - range.begin;
    part.kept_share = static_cast<double>(kept) / static_cast<double>(varying->size() * columns);
  }
  return part;
}

// p - c g (or p + c g) for a constant c: a weight update, oneDNN's sum with scales (1, -c).
std::optional<Part> MatchUpdate(const xlens::HloInstruction& update) {
  using xlens::HloOpcode;
  if ((update.opcode() != HloOpcode::kSubtract && update.opcode() != HloOpcode::kAdd) ||
      update.shape().element_type() != xlens::PrimitiveType::F32) {
    return std::nullopt;
  }
  const xlens::HloInstruction* scaled = update.operand(1);
  if (scaled->opcode() != HloOpcode::kMultiply) return std::nullopt;
  for (int c = 0; c < 2; ++c) {
    const xlens::HloInstruction* constant = Carried(scaled->operand(c));
    if (constant->opcode() != HloOpcode::kConstant || !constant->has_literal() ||
        constant->shape().num_elements() != 1) {
      continue;
    }
    const double value = constant->literal().GetAsDouble(0);
    Part part;
    part.kind = "sum";
    part.scale = static_cast<float>(update.opcode() == HloOpcode::kSubtract ? -value : value);
    part.src = part.dst = dnnl::memory::dims(update.shape().dimensions().begin(), update.shape().dimensions().end());
    part.covered = {&update, scaled};
    part.instruction = update.name();
    return part;
  }
  return std::nullopt;
}

// A reduction of floats over some dimensions with add, maximum, minimum or multiply, each
// output reading more than one element: oneDNN's reduction primitive.
std::optional<Part> MatchReduction(const xlens::HloInstruction& reduce) {
  using xlens::HloOpcode;
  const std::optional<HloOpcode> op = Reducer(reduce);
  if (!op || reduce.shape().element_type() != xlens::PrimitiveType::F32) return std::nullopt;
  const std::map<HloOpcode, dnnl::algorithm> algorithms = {
      {HloOpcode::kAdd, dnnl::algorithm::reduction_sum}, {HloOpcode::kMaximum, dnnl::algorithm::reduction_max},
      {HloOpcode::kMinimum, dnnl::algorithm::reduction_min}, {HloOpcode::kMultiply, dnnl::algorithm::reduction_mul}};
  const auto algorithm = algorithms.find(*op);
  const xlens::Shape& in = reduce.operand(0)->shape();
  if (algorithm == algorithms.end() || in.rank() == 0 || in.num_elements() == reduce.shape().num_elements()) {
    return std::nullopt;
  }
  Part part;
  part.kind = "reduction";
  part.algorithm = algorithm->second;
  part.src = dnnl::memory::dims(in.dimensions().begin(), in.dimensions().end());
  part.dst = part.src;
  for (int64_t d : reduce.dimensions()) part.dst[d] = 1;
  part.covered = {&reduce};
  part.instruction = reduce.name();
  return part;
}

// Every part of the module beside its products and convolutions, each operation in one part
// at most.
std::vector<Part> ModuleParts(const xlens::HloModule& module) {
  std::vector<Part> parts;
  std::set<const xlens::HloInstruction*> taken;
  auto add = [&](std::optional<Part> part) {
    if (!part) return;
    for (const xlens::HloInstruction* i : part->covered) {
      if (taken.count(i)) return;
    }
    taken.insert(part->covered.begin(), part->covered.end());
    parts.push_back(std::move(*part));
  };
  for (const xlens::HloComputation* computation : module.computations()) {
    for (const xlens::HloInstruction* i : computation->instructions()) add(MatchSoftmax(*i));
  }
  for (const xlens::HloComputation* computation : module.computations()) {
    for (const xlens::HloInstruction* i : computation->instructions()) {
      add(MatchUpdate(*i));
      add(MatchReduction(*i));
    }
  }
  return parts;
}

// JAX's erfc spelled out as about forty elementwise instructions (passes/erfc_expansion.h),
// found by the matcher xlens's emitter uses: xlens computes each as one erfc (one divide, one
// exp, one polynomial), so an arithmetic floor that counted its forty operations was one xlens
// beat (the exact GELU read 101-104% of it). For each: its elements and the operations it is
// made of (Costs), which roofline.rest_costs counts as one erf at the exact GELU's rate instead,
// as it counts an erf instruction.
Json ErfcExpansions(const xlens::HloModule& module) {
  Json found = Json::array();
  for (const xlens::HloComputation* computation : module.computations()) {
    for (const xlens::HloInstruction* root : computation->instructions()) {
      const xlens::HloInstruction* z = xlens::MatchErfcExpansionF32(*root);
      if (z == nullptr) continue;
      // Everything between the final select and its argument (constants cost nothing).
      std::vector<const xlens::HloInstruction*> covered;
      std::set<const xlens::HloInstruction*> seen = {z, root};
      std::vector<const xlens::HloInstruction*> stack = {root};
      while (!stack.empty()) {
        const xlens::HloInstruction* i = stack.back();
        stack.pop_back();
        covered.push_back(i);
        for (const xlens::HloInstruction* operand : i->operands()) {
          if (seen.insert(operand).second) stack.push_back(operand);
        }
      }
      found.push_back({{"instruction", root->name()},
                       {"elements", static_cast<double>(root->shape().num_elements())},
                       {"costs", Costs(covered)}});
    }
  }
  return found;
}

std::string Dims(const dnnl::memory::dims& dims) {
  std::string out;
  for (int64_t d : dims) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

dnnl::memory::desc Plain(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// The part's primitive on operands filled as every floor's are; its output against a double
// precision computation of what the module's operations compute on the same inputs (the
// largest difference, relative to the largest output), so a primitive that computed another
// thing than the part would be seen.
Json TimePartOnce(const Part& part, int executions, bool check) {
  KeptBuffers kept;
  std::unordered_map<int, dnnl::memory> args;
  dnnl::primitive primitive;
  std::string impl;
  const dnnl::memory::desc src = Plain(part.src), dst = Plain(part.dst);
  if (part.kind == "softmax" || part.kind == "logsoftmax") {
    const dnnl::softmax_v2_forward::primitive_desc pd(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, part.algorithm, src, dst, 1), Engine());
    primitive = dnnl::softmax_v2_forward(pd);
    impl = pd.impl_info_str();
    args = {{DNNL_ARG_SRC, Filled(src, kept)}, {DNNL_ARG_DST, Filled(dst, kept)}};
  } else if (part.kind == "reduction") {
    const dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(part.algorithm, src, dst, 0.f, 0.f), Engine());
    primitive = dnnl::reduction(pd);
    impl = pd.impl_info_str();
    args = {{DNNL_ARG_SRC, Filled(src, kept)}, {DNNL_ARG_DST, Filled(dst, kept)}};
  } else {
    const dnnl::sum::primitive_desc pd(dst, {1.f, part.scale}, {src, src}, Engine());
    primitive = dnnl::sum(pd);
    impl = pd.impl_info_str();
    args = {{DNNL_ARG_MULTIPLE_SRC, Filled(src, kept)}, {DNNL_ARG_MULTIPLE_SRC + 1, Filled(src, kept)},
            {DNNL_ARG_DST, Filled(dst, kept)}};
  }
  const double ms = BestMs(primitive, args, executions);
  Json out = {{"kind", part.kind}, {"shape", Dims(part.src) + (part.dst != part.src ? "->" + Dims(part.dst) : "")},
              {"ms", ms}, {"impl", impl}};
  if (!check) return out;
  // The check, on the inputs as the last execution left them (none is written in place).
  const float* in = static_cast<const float*>(args.at(part.kind == "sum" ? DNNL_ARG_MULTIPLE_SRC : DNNL_ARG_SRC)
                                                  .get_data_handle());
  const float* result = static_cast<const float*>(args.at(DNNL_ARG_DST).get_data_handle());
  std::vector<double> expected(static_cast<size_t>(dst.get_size() / sizeof(float)));
  if (part.kind == "softmax" || part.kind == "logsoftmax") {
    const int64_t rows = part.src[0], columns = part.src[1];
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = in + r * columns;
      double max = -INFINITY, sum = 0;
      for (int64_t c = 0; c < columns; ++c) max = std::max(max, static_cast<double>(x[c]));
      for (int64_t c = 0; c < columns; ++c) sum += std::exp(x[c] - max);
      for (int64_t c = 0; c < columns; ++c) {
        expected[r * columns + c] = part.kind == "softmax" ? std::exp(x[c] - max) / sum : x[c] - max - std::log(sum);
      }
    }
  } else if (part.kind == "reduction") {
    const bool add = part.algorithm == dnnl::algorithm::reduction_sum, mul = part.algorithm == dnnl::algorithm::reduction_mul;
    const bool max = part.algorithm == dnnl::algorithm::reduction_max;
    std::vector<bool> started(expected.size(), false);
    const int64_t elements = static_cast<int64_t>(src.get_size() / sizeof(float));
    for (int64_t e = 0; e < elements; ++e) {
      int64_t rest = e, index = 0, stride = 1;
      for (int d = static_cast<int>(part.src.size()) - 1; d >= 0; --d) {
        const int64_t at = rest % part.src[d];
        rest /= part.src[d];
        if (part.dst[d] != 1) index += at * stride;
        stride *= part.dst[d];
      }
      const double v = in[e];
      double& acc = expected[index];
      acc = !started[index] ? v : add ? acc + v : mul ? acc * v : max ? std::max(acc, v) : std::min(acc, v);
      started[index] = true;
    }
  } else {
    const float* g = static_cast<const float*>(args.at(DNNL_ARG_MULTIPLE_SRC + 1).get_data_handle());
    for (size_t e = 0; e < expected.size(); ++e) expected[e] = in[e] + static_cast<double>(part.scale) * g[e];
  }
  double largest = 0, error = 0;
  for (size_t e = 0; e < expected.size(); ++e) {
    largest = std::max(largest, std::abs(expected[e]));
    error = std::max(error, std::abs(expected[e] - result[e]));
  }
  out["relative_error"] = largest > 0 ? error / largest : error;
  return out;
}

Json PartJson(const Part& part, int executions, bool timed) {
  Json out;
  try {
    if (timed) {
      out = BestOverThreads([&] { return TimePartOnce(part, executions, false); });
    } else {
      // Run once, untimed, and checked against the operations it stands for.
      const int64_t sampling = sampling_ns;
      sampling_ns = 0;
      out = TimePartOnce(part, 1, true);
      sampling_ns = sampling;
      out.erase("ms");
    }
  } catch (const dnnl::error& e) {
    out = {{"kind", part.kind}, {"refused", std::string("oneDNN: ") + e.what()}};
  }
  if (!out.contains("shape")) {
    out["shape"] = Dims(part.src) + (part.dst != part.src ? "->" + Dims(part.dst) : "");
  }
  Json names = Json::array();
  for (const xlens::HloInstruction* i : part.covered) names.push_back(i->name());
  // What the part must move at least: its operands read once, its result written once; of a
  // masked softmax only `kept_share` of these (roofline.part_floor), while `costs` stays what the
  // part covers of the module's operations.
  const double src_bytes = static_cast<double>(Plain(part.src).get_size());
  const double dst_bytes = static_cast<double>(Plain(part.dst).get_size());
  out["read_bytes"] = src_bytes * (part.kind == "sum" ? 2 : 1);
  out["write_bytes"] = dst_bytes;
  out["instruction"] = part.instruction;
  out["covers"] = names;
  out["costs"] = Costs(part.covered);
  if (part.kept_share < 1) out["kept_share"] = part.kept_share;
  return out;
}

// Every dot and convolution of the module, timed standalone; the module's library time is
// their sum (a chain of calls can at best lose nothing between them). A product whose output a
// mask partly discards is timed also for the share it keeps (ReadColumnsPerRow), one whose lhs a
// mask makes zero along part of its contraction for the share of the contraction it needs
// (runtime::RowUniformOutsideColumnsOfValue), and the faster holds. With `timed` false, the calls as they would be timed (shapes, kept shares), untimed.
std::optional<Json> ModuleCalls(const std::string& file, int executions, bool timed = true, bool parts_too = true) {
  auto text = xlens::ReadFile(file);
  if (!text.ok()) {
    std::fprintf(stderr, "xlens machine_limits: --hlo=%s: %s\n", file.c_str(), text.status().message().c_str());
    return std::nullopt;
  }
  xlens::ParseOptions options;
  options.filename = file;
  auto module = xlens::ParseHloModule(*text, options);
  if (!module.ok()) {
    std::fprintf(stderr, "xlens machine_limits: %s\n", module.status().message().c_str());
    return std::nullopt;
  }
  // jnp.tril's mask and jnp.where's select are calls in JAX's modules; the computations they
  // called are then removed, so that a product inlined from one is counted once.
  if (!xlens::CallInliner().Run(**module).ok() || !xlens::HloDce().Run(**module).ok()) {
    std::fprintf(stderr, "xlens machine_limits: --hlo=%s: could not inline its calls\n", file.c_str());
    return std::nullopt;
  }
  Json calls = Json::array();
  double total_ms = 0, total_flops = 0;
  bool complete = true;
  for (const xlens::HloComputation* computation : (*module)->computations()) {
    for (const xlens::HloInstruction* i : computation->instructions()) {
      Json call;
      if (i->opcode() == xlens::HloOpcode::kDot && i->dot_dimension_numbers) {
        const auto& dn = *i->dot_dimension_numbers;
        const xlens::Shape &lhs = i->operand(0)->shape(), &rhs = i->operand(1)->shape();
        const int64_t batch = Product(lhs, dn.lhs_batch_dimensions), k = Product(lhs, dn.lhs_contracting_dimensions);
        auto elements = [](const xlens::Shape& shape) {
          int64_t p = 1;
          for (int64_t d = 0; d < shape.rank(); ++d) p *= shape.dimensions(d);
          return p;
        };
        if (batch * k == 0) continue;
        const int64_t m = elements(lhs) / (batch * k);
        const int64_t n = elements(rhs) / (batch * Product(rhs, dn.rhs_contracting_dimensions));
        if (batch * m * k * n == 0) continue;
        // One row and one column dimension beside the batch: the scores' [m, n] are its last two.
        const auto beside = [](const std::vector<int64_t>& batch_dims, const std::vector<int64_t>& contracted) {
          return static_cast<int64_t>(batch_dims.size() + contracted.size());
        };
        const bool rows_and_columns =
            lhs.rank() == beside(dn.lhs_batch_dimensions, dn.lhs_contracting_dimensions) + 1 &&
            rhs.rank() == beside(dn.rhs_batch_dimensions, dn.rhs_contracting_dimensions) + 1;
        std::optional<std::vector<xlens::runtime::ColumnRange>> read;
        if (rows_and_columns) read = ReadColumnsPerRow(*i);
        // Blocks of 128 rows as xlens computes them, and the two sizes below: for a causal
        // 8x512x64x512 the best of 64 (0.71-0.80 ms) and 32 (0.73-0.95) beat 128 (0.77-0.82) in
        // some runs; 16 (0.85-1.34) and 256 (0.91-2.0) never did.
        std::vector<std::pair<int64_t, std::vector<KeptBlock>>> blockings;  // rows per block, blocks
        for (int64_t rows_per_block : {32, 64, 128}) {
          if (!read || rows_per_block >= m) continue;
          std::vector<KeptBlock> blocks = KeptBlocks(m, n, *read, rows_per_block);
          if (!blocks.empty()) blockings.emplace_back(rows_per_block, std::move(blocks));
        }
        // A product whose lhs is the softmax of masked scores ([batch..., m, k], contracted over
        // its last dimension): blocks of 64 rows as xlens contracts them, and 32 and 128 as for
        // the scores above.
        std::vector<std::pair<int64_t, std::vector<ContractionBlock>>> contractions;  // rows per block, blocks
        const xlens::HloInstruction& lhs_instruction = *i->operand(0);
        bool contracts_columns = rows_and_columns && !read && dn.lhs_contracting_dimensions.size() == 1 &&
                                 dn.lhs_contracting_dimensions[0] == lhs.rank() - 1 && RowMajor(lhs);
        for (size_t d = 0; d < dn.lhs_batch_dimensions.size(); ++d) {  // the leading dimensions
          contracts_columns = contracts_columns && dn.lhs_batch_dimensions[d] == static_cast<int64_t>(d);
        }
        std::optional<std::vector<xlens::runtime::ColumnRange>> nonzero;
        if (contracts_columns) nonzero = xlens::runtime::RowUniformOutsideColumnsOfValue(lhs_instruction);
        for (int64_t rows_per_block : {32, 64, 128}) {
          if (!nonzero || static_cast<int64_t>(nonzero->size()) != m || rows_per_block >= m) continue;
          std::vector<ContractionBlock> blocks = ContractionBlocks(m, k, *nonzero, rows_per_block);
          if (!blocks.empty()) contractions.emplace_back(rows_per_block, std::move(blocks));
        }
        if (!timed) {
          call = {{"kind", "matmul"},
                  {"shape", std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" +
                                std::to_string(n)},
                  {"flops", 2.0 * batch * m * k * n}};
          if (!blockings.empty()) {
            Json kept = Json::array();
            for (const auto& [rows_per_block, blocks] : blockings) {
              kept.push_back({{"rows_per_block", rows_per_block}, {"kept_share", KeptShare(m, n, blocks)}});
            }
            call["kept"] = kept;
          }
          if (!contractions.empty()) {
            Json kept = Json::array();
            for (const auto& [rows_per_block, blocks] : contractions) {
              kept.push_back({{"rows_per_block", rows_per_block}, {"kept_share", ContractedShare(m, k, blocks)}});
            }
            call["kept"] = kept;
            call["kept_of"] = "contraction";
          }
        } else {
          try {
            call = TimeMatmul(batch, m, k, n, executions);
            // The fastest of the full product and each blocking of the share kept.
            const double full_ms = call["ms"].get<double>();
            Json tried = Json::array();
            for (const auto& [rows_per_block, blocks] : blockings) {
              Json kept = BestOverThreads([&] { return TimeKeptMatmulOnce(batch, m, k, n, blocks, executions); });
              kept["rows_per_block"] = rows_per_block;
              tried.push_back({{"rows_per_block", rows_per_block}, {"ms", kept["ms"]}, {"threads", kept["threads"]}});
              if (kept["ms"].get<double>() < call["ms"].get<double>()) call = kept;
            }
            for (const auto& [rows_per_block, blocks] : contractions) {
              Json kept =
                  BestOverThreads([&] { return TimeContractedMatmulOnce(batch, m, k, n, blocks, executions); });
              kept["rows_per_block"] = rows_per_block;
              tried.push_back({{"rows_per_block", rows_per_block}, {"ms", kept["ms"]}, {"threads", kept["threads"]}});
              if (kept["ms"].get<double>() < call["ms"].get<double>()) call = kept;
              Json parts = TimeContractedMatmulPerBatchOnce(batch, m, k, n, blocks, executions);
              parts["rows_per_block"] = rows_per_block;
              tried.push_back({{"rows_per_block", rows_per_block}, {"parts", "batch"}, {"ms", parts["ms"]},
                               {"threads", parts["threads"]}});
              if (parts["ms"].get<double>() < call["ms"].get<double>()) call = parts;
            }
            if (!blockings.empty() || !contractions.empty()) {
              call["full_ms"] = full_ms;
              call["blockings"] = tried;
            }
          } catch (const dnnl::error& e) {
            complete = false;
            call = {{"kind", "matmul"}, {"refused", std::string("oneDNN: ") + e.what()},
                    {"flops", 2.0 * batch * m * k * n}};
          }
        }
      } else if (i->opcode() == xlens::HloOpcode::kConvolution) {
        std::string why;
        std::optional<ConvShape> pose = PoseConvolution(*i, &why);
        if (pose && !timed) {
          call = {{"kind", "convolution_" + pose->kind}};
        } else if (pose) {
          try {
            call = TimeConvolution(*pose, executions);
          } catch (const dnnl::error& e) {
            why = std::string("oneDNN: ") + e.what();
          }
        }
        if (!call.contains("kind")) {
          complete = false;
          // Its flops, from the HLO, for a bound at the peak FLOP/s instead.
          double flops = 2.0;
          for (int64_t d : i->shape().dimensions()) flops *= d;
          if (i->convolution_dimension_numbers) {
            const auto& dn = *i->convolution_dimension_numbers;
            const xlens::Shape& rhs = i->operand(1)->shape();
            flops *= rhs.dimensions(dn.kernel_input_feature_dimension) * Product(rhs, dn.kernel_spatial_dimensions);
          }
          call = {{"kind", "convolution"}, {"refused", why}, {"flops", flops}};
        }
      } else {
        continue;
      }
      call["instruction"] = i->name();
      if (call.contains("ms")) {
        total_ms += call["ms"].get<double>();
        total_flops += call["flops"].get<double>();
      }
      calls.push_back(call);
    }
  }
  // The rest of a module with library calls, as oneDNN's primitives (ModuleParts).
  Json parts = Json::array();
  double parts_ms = 0;
  if (!calls.empty() && parts_too) {
    for (const Part& part : ModuleParts(**module)) {
      parts.push_back(PartJson(part, executions, timed));
      parts_ms += parts.back().value("ms", 0.0);
    }
  }
  return Json{{"file", file}, {"calls", calls}, {"total_ms", total_ms}, {"total_flops", total_flops},
              {"complete", complete}, {"parts", parts}, {"parts_ms", parts_ms},
              {"program_ms", total_ms + parts_ms}, {"erfc_expansions", ErfcExpansions(**module)}};
}
#endif

#ifdef XLENS_HAVE_ONEDNN
// The floor `--paired --library` holds each of the module's runs to: its library calls standalone,
// timed right after the run as ModuleCalls times them (each on one and on all OpenMP threads, the
// blockings of a masked product too, the fastest holding) but each the best of three executions
// after an untimed one, with no sampling past them. Then a pause of 20 ms, untimed, for oneDNN's
// OpenMP threads to stop spinning before the module runs again (a call's team spun 7 ms of CPU in
// the 100 ms after it), and the module's runs that follow are untimed warm-ups (paired_run.cc).
xlens::bench::PairedFloor LibraryPairedFloor(const std::string& file) {
  return {"library", [file]() -> xlens::StatusOr<double> {
            sampling_ns = 0;
            // The parts beside the calls are held to floors roofline.py works out (bytes and
            // arithmetic) wherever oneDNN's primitive is not faster; they are not run here.
            std::optional<Json> calls = ModuleCalls(file, 3, true, /*parts_too=*/false);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (!calls) return xlens::Error(file + ": its library calls could not be timed");
            if (!(*calls)["complete"].get<bool>()) {
              return xlens::Error(file + ": oneDNN refuses one of its calls, so it has no library floor to pair");
            }
            if ((*calls)["calls"].empty()) return xlens::Error(file + ": no library calls");
            return (*calls)["total_ms"].get<double>();
          }};
}
#endif

std::vector<int64_t> Numbers(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoll(item.c_str()));
  return out;
}

// Each function's rate: the better of oneDNN's eltwise kernel and xlens's own loop, the other
// kept beside. 64K floats a thread, in and out: 512 KiB a core, inside its L2, and tens of
// microseconds of work, far more than a parallel region's start.
Json TranscendentalFloors(int threads, int executions, int64_t elements_per_thread) {
#ifdef XLENS_HAVE_ONEDNN
  Json rates = TranscendentalRates(executions, elements_per_thread, threads);
#else
  Json rates = Json::object();
#endif
  const Json inline_rates = InlineTranscendentalRates(threads, executions, elements_per_thread);
  for (const auto& [name, own] : inline_rates.items()) {
    const Json library = rates.contains(name) ? rates[name] : Json::object();
    const double library_rate = library.value("elements_per_second", 0.0);
    const double own_rate = own["elements_per_second"].get<double>();
    rates[name] = {{"function", name},
                   {"elements_per_second", std::max(library_rate, own_rate)},
                   {"impl", own_rate > library_rate ? "xlens inline" : library.value("impl", "oneDNN")},
                   {"inline_elements_per_second", own_rate},
                   {"onednn", library}};
  }
  return rates;
}

}  // namespace

int main(int argc, char** argv) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int threads = cpus, repetitions = 5;
  bool quick = false, floors = false, calls = false, library = false;
  int64_t stream_bytes = 0;
  std::vector<std::string> matmuls, convs, hlos;
  xlens::bench::PairedOptions paired;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--threads=")) {
      threads = std::max(1, std::atoi(v));
    } else if (const char* v = value("--repetitions=")) {
      repetitions = std::max(1, std::atoi(v));
    } else if (arg == "--quick") {
      quick = true;
    } else if (arg == "--floors") {
      floors = true;
    } else if (arg == "--calls") {
      calls = true;
    } else if (arg == "--library") {
      library = true;
    } else if (const char* v = value("--stream=")) {
      char* end = nullptr;
      stream_bytes = std::strtoll(v, &end, 10);
      if (end == v || *end != '\0' || stream_bytes < 1024 || stream_bytes > (int64_t{1} << 40)) {
        std::fprintf(stderr, "xlens machine_limits: --stream=%s: expected a working set in bytes, 1024 to 2^40\n", v);
        return 1;
      }
    } else if (const char* v = value("--paired=")) {
      paired.hlo_file = v;
    } else if (const char* v = value("--inputs=")) {
      paired.inputs_dir = v;
    } else if (const char* v = value("--xla_xlens_persistent_cache_dir=")) {
      paired.persistent_cache_dir = v;
    } else if (const char* v = value("--pairs=")) {
      paired.pairs = std::max(1, std::atoi(v));
    } else if (const char* v = value("--bytes=")) {
      paired.bytes = std::max<int64_t>(0, std::atoll(v));
    } else if (const char* v = value("--kernels=")) {
      std::stringstream names(v);
      for (std::string name; std::getline(names, name, ',');) {
        using xlens::profiler::StreamKernel;
        const std::optional<StreamKernel> kernel = name == "copy"    ? std::optional(StreamKernel::kCopy)
                                                   : name == "triad" ? std::optional(StreamKernel::kTriad)
                                                   : name == "read"  ? std::optional(StreamKernel::kRead)
                                                                     : std::nullopt;
        if (!kernel) {
          std::fprintf(stderr, "xlens machine_limits: --kernels=%s: expected copy, triad or read, comma-separated\n", v);
          return 1;
        }
        paired.kernels.push_back(*kernel);
      }
    } else if (const char* v = value("--matmul=")) {
      matmuls.push_back(v);
    } else if (const char* v = value("--conv=")) {
      convs.push_back(v);
    } else if (const char* v = value("--hlo=")) {
      hlos.push_back(v);
    } else {
      std::fprintf(stderr,
                   "xlens machine_limits: unknown argument '%s' (expected --threads=N, --repetitions=R, "
                   "--quick, --stream=BYTES, --floors, --calls, --paired=FILE, --library, --inputs=DIR, --kernels=K,..., "
                   "--bytes=B, --pairs=N, --xla_xlens_persistent_cache_dir=DIR, --matmul=[B,]M,K,N, "
                   "--conv=N,H,W,C,KH,KW,O[,stride[,pad[,groups]]], --hlo=FILE)\n",
                   arg.c_str());
      return 1;
    }
  }
  // The shapes are read before anything is measured, so a mistyped one fails at once.
#ifdef XLENS_HAVE_ONEDNN
  std::vector<std::vector<int64_t>> matmul_shapes;
  for (const std::string& m : matmuls) {
    std::vector<int64_t> v = Numbers(m);
    if (v.size() == 3) v.insert(v.begin(), 1);
    if (v.size() != 4 || *std::min_element(v.begin(), v.end()) < 1) {
      std::fprintf(stderr, "xlens machine_limits: --matmul=%s: expected [B,]M,K,N, all positive\n", m.c_str());
      return 1;
    }
    matmul_shapes.push_back(v);
  }
  std::vector<ConvShape> conv_shapes;
  for (const std::string& c : convs) {
    std::vector<int64_t> v = Numbers(c);
    const int64_t stride = v.size() > 7 ? v[7] : 1, pad = v.size() > 8 ? v[8] : 0;
    const int64_t groups = v.size() > 9 ? v[9] : 1;
    if (v.size() < 7 || v.size() > 10 || *std::min_element(v.begin(), v.begin() + 7) < 1 || stride < 1 ||
        pad < 0 || groups < 1 || v[3] % groups != 0 || v[6] % groups != 0 || v[1] + 2 * pad < v[4] ||
        v[2] + 2 * pad < v[5]) {
      std::fprintf(stderr,
                   "xlens machine_limits: --conv=%s: expected N,H,W,C,KH,KW,O[,stride[,pad[,groups]]], the "
                   "kernel no larger than the padded image and the groups dividing C and O\n",
                   c.c_str());
      return 1;
    }
    ConvShape s;
    s.kind = "forward";
    s.images = v[0];
    s.src_spatial = {v[1], v[2]};
    s.input_channels = v[3];
    s.kernel_spatial = {v[4], v[5]};
    s.output_channels = v[6];
    s.groups = groups;
    s.strides = {stride, stride};
    s.dilations = {0, 0};
    s.padding_low = s.padding_high = {pad, pad};
    for (int d = 0; d < 2; ++d) {
      s.dst_spatial.push_back((s.src_spatial[d] + 2 * pad - s.kernel_spatial[d]) / stride + 1);
    }
    conv_shapes.push_back(s);
  }
#endif
  if (calls) {
    Json modules = Json::array();
#ifdef XLENS_HAVE_ONEDNN
    for (const std::string& file : hlos) {
      auto module = ModuleCalls(file, 0, /*timed=*/false);
      if (!module) return 1;
      modules.push_back(*module);
    }
#endif
    std::printf("%s\n", Json{{"hlo_modules", modules}}.dump(1).c_str());
    return 0;
  }
  using xlens::profiler::StreamKernel;
  namespace profiler = xlens::profiler;
  if (!paired.hlo_file.empty()) {
    if (library) {
#ifdef XLENS_HAVE_ONEDNN
      paired.floors.push_back(LibraryPairedFloor(paired.hlo_file));
#else
      std::fprintf(stderr, "xlens machine_limits: --library: this build has no oneDNN\n");
      return 1;
#endif
    } else if (paired.kernels.empty()) {
      paired.kernels = {StreamKernel::kCopy, StreamKernel::kTriad, StreamKernel::kRead};
    }
    paired.threads = threads;
    auto result = xlens::bench::RunPaired(paired);
    if (!result.ok()) {
      std::fprintf(stderr, "xlens machine_limits: --paired=%s: %s\n", paired.hlo_file.c_str(),
                   result.status().message().c_str());
      return 1;
    }
    std::printf("%s\n", result->dump().c_str());
    return 0;
  }
  if (stream_bytes > 0) {
    // As the sweep measures a point: each repetition moves at least 32 MiB, the best of 3R; then,
    // as BestMs samples a library call and codegen_vs_xla a round of xlens's runs, more while
    // they take under 0.2 s in all, up to 50 times as many. The workload beside it is held to
    // this best by its own best of 0.2 s of runs: against 3R alone (15, some 40 ms over 192 MiB)
    // 6 of 9 memory-bound rows beat the floors measured around their rounds (up to 114%, triad's
    // best of some 80 runs), which measured the sample sizes, not the code.
    const int reps = 3 * repetitions;
    constexpr int64_t kPerRepetition = int64_t{32} << 20;
    Json point = {{"working_set_bytes", stream_bytes}, {"threads", threads}};
    for (StreamKernel k : {StreamKernel::kCopy, StreamKernel::kTriad, StreamKernel::kRead}) {
      double gbps = profiler::StreamBandwidthGBps(k, stream_bytes, threads, reps, kPerRepetition);
      const double repetition_ms = static_cast<double>(std::max(stream_bytes, kPerRepetition)) / (gbps * 1e6);
      const int64_t wanted = std::min<int64_t>(static_cast<int64_t>(std::ceil(200.0 / repetition_ms)), int64_t{50} * reps);
      if (wanted > reps) {
        gbps = std::max(gbps, profiler::StreamBandwidthGBps(k, stream_bytes, threads, static_cast<int>(wanted - reps),
                                                            kPerRepetition));
      }
      point[std::string(profiler::StreamKernelName(k)) + "_gbps"] = gbps;
    }
    std::printf("%s\n", point.dump(2).c_str());
    return 0;
  }
  if (floors) {
    // The FMA peak, the modules' library calls and the transcendentals' rates, as the full run
    // measures them, and nothing else (a second or two beside a workload's round).
    const bool avx512 = std::string(profiler::WidestVectorIsa()) == "avx512f";
    const int fma_reps = repetitions * 6, executions = repetitions * 4;
    Json peak = {{"isa", profiler::WidestVectorIsa()},
                 {"gflops_all_cores", profiler::PeakGflops(threads, fma_reps, 1 << 18)}};
    if (avx512) peak["avx2_gflops_all_cores"] = profiler::PeakGflops(threads, fma_reps, 1 << 18, true);
    Json out = {{"threads", threads}, {"peak_f32", peak}};
#ifdef XLENS_HAVE_ONEDNN
    Json modules = Json::array();
    for (const std::string& file : hlos) {
      auto module = ModuleCalls(file, executions);
      if (!module) return 1;
      modules.push_back(*module);
    }
    out["hlo_modules"] = modules;
#endif
    out["transcendentals"] = TranscendentalFloors(threads, executions, int64_t{1} << 16);
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  // Every figure is the best of many short repetitions rather than the mean of a few long ones:
  // on a shared machine a neighbour can take the memory bus or a core for a while.
  profiler::MachineLimitsOptions options;
  options.threads = threads;
  options.repetitions = quick ? 1 : repetitions * 3;
  if (quick) options.memory_bytes = int64_t{8} << 20;
  options.fine = !quick;
  const profiler::MachineLimits limits = profiler::MeasureMachineLimits(options);

  Json out;
  out["cpu"] = CpuModel();
  out["threads"] = threads;
  out["vector_isa"] = profiler::WidestVectorIsa();
  Json cache_json = Json::array();
  for (const profiler::CacheLevel& c : limits.caches) {
    // bytes: what the CPUs sharing an instance count on (profiler::CacheShareBytes); sysfs's
    // figure beside it.
    cache_json.push_back({{"level", c.level}, {"bytes", c.bytes}, {"reported_bytes", c.reported_bytes},
                          {"instances", c.instances}, {"total_bytes", c.total_bytes()}});
  }
  out["caches"] = cache_json;
  // Memory: STREAM's rule, each array at least four times the last-level cache; one thread too.
  const int64_t array = limits.memory.working_set_bytes / 3;
  const int reps = options.repetitions;
  out["memory"] = {
      {"array_bytes", array},
      {"copy_gbps_one_thread", profiler::StreamBandwidthGBps(StreamKernel::kCopy, 2 * array, 1, reps, 1)},
      {"triad_gbps_one_thread", profiler::StreamBandwidthGBps(StreamKernel::kTriad, 3 * array, 1, reps, 1)},
      {"copy_gbps_all_threads", limits.memory.copy_gbps},
      {"triad_gbps_all_threads", limits.memory.triad_gbps},
      {"read_gbps_all_threads", limits.memory.read_gbps}};
  Json sweep = Json::array();
  for (const profiler::BandwidthPoint& p : limits.sweep) {
    sweep.push_back({{"working_set_bytes", p.working_set_bytes}, {"copy_gbps", p.copy_gbps},
                     {"triad_gbps", p.triad_gbps}, {"read_gbps", p.read_gbps}});
  }
  out["working_set_sweep"] = sweep;
  // About a millisecond per repetition.
  const int fma_reps = quick ? 2 : repetitions * 6;
  const bool avx512 = std::string(profiler::WidestVectorIsa()) == "avx512f";
  Json peak = {{"isa", profiler::WidestVectorIsa()},
               {"gflops_one_core", profiler::PeakGflops(1, fma_reps, 1 << 18)},
               {"gflops_all_cores", limits.peak_gflops}};
  if (avx512) {  // the narrower unit too: on some cores 512-bit FMAs issue at half rate
    peak["avx2_gflops_one_core"] = profiler::PeakGflops(1, fma_reps, 1 << 18, true);
    peak["avx2_gflops_all_cores"] = profiler::PeakGflops(threads, fma_reps, 1 << 18, true);
  }
  out["peak_f32"] = peak;

#ifdef XLENS_HAVE_ONEDNN
  const int executions = quick ? 3 : repetitions * 4;
  Json onednn = Json::array();
  try {
    for (const std::vector<int64_t>& v : matmul_shapes) onednn.push_back(TimeMatmul(v[0], v[1], v[2], v[3], executions));
    for (const ConvShape& shape : conv_shapes) onednn.push_back(TimeConvolution(shape, executions));
  } catch (const dnnl::error& e) {
    std::fprintf(stderr, "xlens machine_limits: oneDNN refused a shape given on the command line: %s\n", e.what());
    return 1;
  }
  Json modules = Json::array();
  for (const std::string& file : hlos) {
    auto module = ModuleCalls(file, executions);
    if (!module) return 1;
    modules.push_back(*module);
  }
  out["onednn"] = onednn;
  out["hlo_modules"] = modules;
#else
  out["onednn"] = nullptr;  // this build has no oneDNN
#endif
  out["transcendentals"] = TranscendentalFloors(threads, quick ? 3 : repetitions * 4, int64_t{1} << (quick ? 14 : 16));
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
