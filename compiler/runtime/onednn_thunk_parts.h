// Internal to the oneDNN thunks, shared by the matrix products (onednn_thunks.cc) and the
// convolutions (onednn_convolution_thunks.cc): the thunk's state, the engine and per-thread
// streams, and how a call's parts run over the pool. Only in a build with oneDNN.
#pragma once

#ifdef XLENS_HAVE_ONEDNN
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "compiler/passes/onednn_rewriter.h"
#include "compiler/runtime/depthwise_convolution.h"
#include "compiler/runtime/few_position_convolution.h"
#include "compiler/runtime/onednn_thunks.h"
#include "compiler/runtime/part_epilogue.h"
#include "compiler/runtime/small_product.h"
#include "compiler/support/single_openmp_thread.h"
#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {
namespace onednn_detail {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

inline dnnl::memory::format_tag ChannelsLast(size_t rank) {
  using tag = dnnl::memory::format_tag;
  return rank == 3 ? tag::nwc : rank == 4 ? tag::nhwc : tag::ndhwc;
}

inline const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Each thread of the runtime's pool runs its part of a call on its own stream, and oneDNN stays
// on that thread: Debian builds oneDNN with OpenMP, whose own team would compete with the pool
// for the same cores (its spinning waits cost a scheduler tick per call on a busy machine).
// Every call is made through this stream inside a SingleOpenMpThread, which holds the thread to
// one OpenMP thread for the call and puts the caller's count back after it: some of oneDNN's
// calls open a team of the calling thread's count at the call, not of the one their primitive
// was made with, and a team's second thread spins on after each call (2-9 ms of CPU each time
// under libgomp's default wait policy).
inline dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

// A part's arguments are kept from one call to the next, per thread, as oneDNN memory objects
// whose data handles are pointed at the call's buffers: making them anew for every part (an
// allocation or three each, and a check of its descriptor) cost some 4 us of a 5.5 us call to a
// tiny product, against 1.6 us with kept ones, which is much of a small module's time (the MNIST
// step's two products). Kept by the thunk (the address of its name, unique among the live ones)
// and the part; a kept object is reused only for a descriptor equal to its own, so a thunk made
// where a freed one was finds nothing of the old one's in use. The store is emptied at 1024
// parts (a memory object holds some 1-2 KB): a process that makes thunks for ever does not keep
// their objects for ever, and a program of more parts than that makes its objects anew, as before.
inline std::unordered_map<int, dnnl::memory>& KeptArguments(const void* thunk, int64_t part) {
  thread_local std::map<std::pair<const void*, int64_t>, std::unordered_map<int, dnnl::memory>> store;
  if (store.size() >= 1024) store.clear();
  return store[{thunk, part}];
}

// Sets argument `arg` of a part to `data` laid out as `md`, reusing the kept memory object. The
// kept object's descriptor is compared where it lies: memory::get_desc() copies it (about 1 KB),
// which was 60% of this function's time, itself 1.2% of the convolution step's.
inline void BindArgument(std::unordered_map<int, dnnl::memory>& args, int arg, const dnnl::memory::desc& md,
                         void* data) {
  auto it = args.find(arg);
  if (it != args.end()) {
    const dnnl_memory_desc_t* kept = nullptr;
    if (dnnl_memory_get_memory_desc(it->second.get(), &kept) == dnnl_success &&
        dnnl_memory_desc_equal(kept, &md.data) != 0) {
      it->second.set_data_handle(data);
      return;
    }
  }
  args[arg] = dnnl::memory(md, CpuEngine(), data);
}

// Runs the parts [0, tasks) of one call over the pool (inline without one, or for one part). For
// each part, `bind(t, args, stream)` fills the part's arguments and returns the part (its
// primitive and scratchpad size); the part then runs on its thread's stream with that thread's
// scratchpad. The first oneDNN error, if any, is the call's.
// `after(t)`, where given, runs on the part's thread once the part has run. The parts are
// numbered from `first`, which also keys their kept arguments.
// A large call does not run whole on OpenMP's team instead, even where its threads sleep when
// idle (OMP_WAIT_POLICY=passive: 0.02-0.03 ms of CPU in the 100 ms after a call, against 7 ms under
// libgomp's default): OpenMP splits a call evenly and statically, so a team thread woken late on
// a busy core holds back the whole call, where the pool's caller runs a late worker's parts
// itself. Measured beside other work (load 4-7 on the two cores), the whole call on a team of two
// against the parts on the pool, alternating call by call, 200-500 pairs a run: the GELU MLP's
// 256x512x2048 best 2.68-2.76 against 2.74-2.80 ms, but the time a tenth of its calls beat
// 7.9-9.3 against 5.3-6.2, and the pool's call the faster in 58-61% of pairs; its 256x2048x512
// in k 2.65-3.32 against 2.63-2.65 (pool faster in 58-59%); a 3x3 convolution of 8x32x32x64
// 2.67-2.77 against 2.66-2.72 (pool faster in 50-70%). In the modules (xlens run, alternating
// processes): the GELU MLP's best 6.7-11.3 against 5.1-13.2 ms (lower on the pool in 10 of 11
// pairs), the MLP step's 0.58-0.99 against 0.51-0.54 (4 of 4); their medians and CPU times the
// same within the noise.
// oneDNN's BA16a64b for the weights of a product: tiles of kPackedKeysN columns by kPackedKeysK
// rows of k, each tile row-major in its 64 columns, the tiles k-major within a band of columns.
// A block of columns that starts at a multiple of kPackedKeysN is the same layout at an offset.
constexpr int64_t kPackedKeysN = 64, kPackedKeysK = 16;

template <typename BindPart, typename AfterPart>
Status ExecutePartsOnPool(ThreadPool* pool, int64_t tasks, const std::string& name, BindPart bind, AfterPart after,
                          int64_t first = 0) {
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  auto run = [&](int64_t begin, int64_t end) {
    SingleOpenMpThread single_openmp_thread;
    for (int64_t t = first + begin; t < first + end; ++t) {
      // Traced, each part is a span on the thread that ran it (its number in "part"): a call's
      // timeline then shows where its time went, as a worker's part that started late or the
      // caller running a late worker's parts after its own.
      std::optional<profiler::TraceSpan> span;
      if (profiler::TracingEnabled()) {
        span.emplace(fmt::format("{} part {}", name, t), profiler::category::kLibraryPart);
        span->AddArg("part", t);
      }
      try {
        std::unordered_map<int, dnnl::memory>& args = KeptArguments(&name, t);
        dnnl::stream& stream = ThreadStream();
        const auto& part = bind(t, args, stream);
        thread_local std::vector<char> scratchpad;
        if (scratchpad.size() < part.scratchpad.get_size()) scratchpad.resize(part.scratchpad.get_size());
        BindArgument(args, DNNL_ARG_SCRATCHPAD, part.scratchpad, scratchpad.data());
        part.primitive.execute(stream, args);
        stream.wait();
        after(t);
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(failure_mu);
        failed = true;
        failure = e.what();
      }
    }
  };
  if (pool == nullptr || tasks == 1) {
    run(0, tasks);
  } else {
    pool->ParallelFor(tasks, 1, run);
  }
  if (failed) return Error(fmt::format("{}: oneDNN: {}", name, failure));
  return OkStatus();
}

template <typename BindPart>
Status ExecutePartsOnPool(ThreadPool* pool, int64_t tasks, const std::string& name, BindPart bind) {
  return ExecutePartsOnPool(pool, tasks, name, bind, [](int64_t) {});
}

// `count` floats from an `alignment`-byte boundary in `buffer`, a thread's buffer kept from call
// to call (grown here as needed), for a packed or reordered operand whose vector loads must not
// split cache lines.
inline float* AlignedFloats(std::vector<float>& buffer, size_t count, size_t alignment) {
  const size_t size = count + alignment / sizeof(float);
  if (buffer.size() < size) buffer.resize(size);
  void* start = buffer.data();
  size_t space = buffer.size() * sizeof(float);
  return static_cast<float*>(std::align(alignment, sizeof(float), start, space));
}

}  // namespace onednn_detail

// The call is split into parts that the pool runs in parallel: blocks of rows of each batch
// element for a matmul, blocks of images for a convolution. Parts of the same size share one
// primitive: at most three sizes, the block, the remainder and, for a matmul kept whole
// (Impl::whole), the whole product.
struct OneDnnThunk::Impl {
  using dims = onednn_detail::dims;
  using dt = onednn_detail::dt;

  struct Part {
    dnnl::primitive primitive;
    dnnl::memory::desc src, weights, dst, scratchpad;
    std::vector<dnnl::memory::desc> addends;  // one per kAdd post-op
    // A transposed lhs split into blocks of rows is strided in both dimensions, which oneDNN's
    // fast matmul (brgemm) refuses and its fallback (gemm:jit) runs with a 30-40 ms code
    // generation at its first call: the block is packed into a row-major buffer first
    // (TransposedCopy), from the lhs stored [k, m] (rows pack_lda = m apart).
    bool pack_src = false;
    int64_t pack_lda = 0;
  };
  bool is_convolution = false;
  // A product whose consumer reads only some columns of each row (product_mask.h: a causal
  // mask): per batch element, blocks of rows with the columns they need, the rest never written.
  // A block narrower than the output is computed dense into its own rows of the output and moved
  // into place there, as oneDNN's brgemm takes no output with a longer row than its own (gemm:jit
  // would).
  struct MaskedBlock {
    int64_t row = 0, rows = 0, column = 0, columns = 0;
  };
  std::vector<MaskedBlock> masked_blocks;
  std::map<std::pair<int64_t, int64_t>, Part> masked_parts;  // by (rows, columns)
  int64_t masked_n = 0, masked_k = 0;
  double masked_share = 1;  // of the output computed
  // The rhs (the keys, a transposed rhs) packed per batch element into brgemm's blocked weights
  // (kPackedKeysN, kPackedKeysK above), which every block of rows reads at its first column's
  // offset. Each part of the call packs one batch element and runs all of its blocks.
  bool masked_packed_keys = false;
  // A product whose lhs holds one value a row past some column of each row, the same for every
  // batch element (product_mask.h: RowUniformOutsideColumns; the probabilities of a causally
  // masked softmax, exactly 0 there in practice): per batch element, blocks of rows, each
  // contracted over its first k_end columns only and written in place (its rows span the
  // output's). The columns skipped add 0 * v = +-0 to each sum where the lhs's value there is 0 and
  // the rhs's rows skipped are finite, which every call checks: one element a row of the lhs
  // (column k - 1), and per batch element the rhs's last row that is not finite. A block that
  // fails either runs over the whole contraction, so the result is the full product's up to the
  // rounding of its sums (onednn_masked_contraction.cc).
  struct ContractionBlock {
    int64_t row = 0, rows = 0, k_end = 0;
  };
  std::vector<ContractionBlock> contraction_blocks;
  std::map<std::pair<int64_t, int64_t>, Part> contraction_parts;  // by (rows, k_end)
  int64_t contraction_k = 0, contraction_n = 0;
  int64_t contraction_checked_from = 0;  // the rhs's rows from here on are checked finite
  double contraction_share = 1;  // of the multiply-adds computed
  // A product under SmallProductLimit: computed by SmallProduct, then its post-ops, no oneDNN.
  bool small = false;
  // A product of narrow output rows (narrow_product.h), its shape in small_shape: computed by
  // NarrowProduct in narrow_parts blocks of narrow_block rows, then its post-ops. The oneDNN parts
  // stay built, for a call whose output shares a buffer with an operand.
  bool narrow = false;
  int64_t narrow_block = 0, narrow_parts = 1;
  // With `narrow`: parts are blocks of narrow_block elements of k instead (few rows, a long k,
  // an rhs to pack): each part packs only its rows of the rhs, the first writes the output and
  // each other a partial product into a buffer of the caller's, which adds them and applies the
  // post-ops after the parts.
  bool narrow_split_k = false;
  // With `narrow`: a product over a short k with a transposed rhs into wide rows, computed by
  // ShortKProduct in narrow_parts blocks of narrow_block columns.
  bool short_k = false;
  SmallProductShape small_shape;
  std::vector<OneDnnPostOp> post_ops;
  std::map<int64_t, Part> parts;  // by rows (matmul) or images (convolution)
  int64_t lhs_slot = -1, rhs_slot = -1, output_slot = -1;
  // Matmul: where in their buffers the operands start, in elements (OneDnnCall::lhs_offset).
  int64_t lhs_offset = 0, rhs_offset = 0;
  float* Lhs(char** frame) const { return reinterpret_cast<float*>(frame[lhs_slot]) + lhs_offset; }
  float* Rhs(char** frame) const { return reinterpret_cast<float*>(frame[rhs_slot]) + rhs_offset; }
  std::vector<int> addend_post_ops;      // the post-op index of each addend
  std::vector<int64_t> addend_slots;
  std::vector<OneDnnPostOp::Addend> addend_kinds;
  // The post-ops from the call's first ReLU on, which oneDNN's parts leave to the thunk
  // (ApplyOwnPostOps, on each part's output as soon as it is written), and the first of the
  // addends they read; the addends before it are oneDNN's binary post-ops. oneDNN 2.6 computes
  // eltwise_relu with alpha 0 as vmaxps(x, 0), which gives 0 for a NaN (its clip and binary max
  // too), where XLA's maximum and the evaluator keep the NaN.
  std::vector<OneDnnPostOp> own_post_ops;
  size_t own_addends_from = 0;
  // Matmul: batch x blocks of `block` rows out of m (or columns out of n); element offsets per
  // batch element, row and column.
  // Convolution: blocks of `block` images out of `total`.
  int64_t batch = 1, total = 0, block = 0, blocks = 1;
  bool split_rows = true;  // matmul: parts are blocks of rows (else of columns)
  // Matmul: parts are blocks of the contraction dimension instead (onednn_thunks.cc: a long k
  // into short rows). The first part writes the output, each other part a partial product of
  // the whole output's size into a buffer of the caller's, and a second loop over the pool adds
  // those into the output, then applies `post_ops` (ApplySmallProductPostOps) to the rows it
  // summed; the parts themselves run without post-ops.
  bool split_k = false;
  // Matmul: the product is also kept whole, as one more part (of `total` rows or columns), which
  // runs instead of the parts one after the other where the pool would run them on the caller
  // alone (ThreadPool::RunsInline: a machine so busy that the parallel runs lost).
  bool whole = false;
  // Column parts: the addends are summed into the output first and added to by oneDNN's sum
  // post-op (onednn_thunks.cc: SumAddendsInto), not read as binary post-ops.
  bool sum_addends = false;
  int64_t src_step = 0, src_row_step = 0, weights_step = 0, weights_column_step = 0;
  int64_t dst_step = 0, dst_row_step = 0;
  // Convolution weights lie in any order of their dimensions; oneDNN may want them blocked:
  // reordered once per call into a buffer made with the thunk (the weights may change between
  // calls). For backward weights the other way: the parts' partial sums, in oneDNN's layout,
  // are added up and reordered into the result. The reorder is made with the thunk, as its
  // other primitives are (single-threaded, see SingleThreadedCreation), not looked up in
  // oneDNN's primitive cache on every call.
  OneDnnConvolution::Kind convolution_kind = OneDnnConvolution::Kind::kForward;
  bool reorder_weights = false;
  // Weights that are constants of the program are reordered once, at the first call, and kept.
  bool constant_weights = false;
  mutable std::mutex weights_mutex;
  mutable bool weights_ready = false;
  dnnl::memory::desc user_weights_md;
  mutable dnnl::memory weights_buffer;
  mutable std::vector<dnnl::memory> partial_weights;  // backward weights: one per part
  dnnl::reorder weights_reorder;  // user -> oneDNN's layout (backward weights: the reverse)
  // Weights of a few thousand elements are reordered by a gather instead (BuildWeightsGather):
  // element e of oneDNN's layout is user element weights_gather[e] (-1: padding, zero); for
  // backward weights, user element i is the parts' sum of their element weights_gather[i] (-1:
  // none, a gap of the user's strides). Empty: weights_reorder.
  std::vector<int32_t> weights_gather;
  // A forward convolution of one image split into bands of output rows (its first spatial
  // dimension), each band its own primitive over the input rows it reads (the top and bottom
  // bands keep the padding); empty when the call runs in parts of images.
  struct Band {
    Part part;
    int64_t src_offset = 0, dst_offset = 0;  // elements
  };
  std::vector<Band> bands;
  // A forward convolution of few output positions with variable weights: each position's window
  // read from the input (or its padded copy) and multiplied by the weights as they lie, its
  // post-ops after (few_position_convolution.h), in `blocks` parts of its columns (and rows) on
  // the pool; no oneDNN call.
  bool few_positions = false;
  FewPositionConvolution few;
  int64_t few_row_parts = 1;  // shares of the rows per column block
  // A large forward depthwise convolution in xlens's own loops (depthwise_convolution.h), in
  // `blocks` parts of `depthwise_bands` bands of output rows per image on the pool; no oneDNN call.
  std::optional<DepthwiseConvolution> depthwise;
  int64_t depthwise_bands = 1;
  std::string implementation;
  // A loop kernel run on each part's images once the part has run (part_epilogue.h).
  std::shared_ptr<const PartEpilogue> epilogue;

  Status BuildConvolution(const OneDnnCall& call, const std::string& name, int64_t parallelism,
                          const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes);
  // The convolution on oneDNN's primitives (BuildConvolution's, where no loops of xlens's take it).
  // With `choose_kernel`, oneDNN's implementations for the parts are timed (ChooseOneDnnKernel).
  Status BuildOneDnnConvolution(const OneDnnCall& call, const std::string& name, int64_t parallelism,
                                const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes,
                                bool choose_kernel = false);
  // With the parts built on oneDNN's first implementation: times it against the next ones in
  // `available` (oneDNN's order) on scratch operands and builds the parts again, by `build`
  // (an implementation's name, empty for oneDNN's first), on the fastest.
  // Returns the chosen kernel and the trial's summary ("jit:avx512_core, timed 0.048 ms against
  // ..."), empty where nothing was timed.
  std::string ChooseOneDnnKernel(const OneDnnCall& call, int64_t parallelism,
                                 const std::vector<std::string>& available,
                                 const std::function<void(const std::string&)>& build);
  // Runs the convolution in the depthwise loops `d` from now on, in parts over `parallelism` threads.
  void UseDepthwise(const DepthwiseConvolution& d, int64_t parallelism);
  // With oneDNN's call built: times it and the loops `d` on scratch buffers (measured_choice.h)
  // and keeps the faster; the implementation then says which was chosen and both times.
  void ChooseDepthwiseOrOneDnn(const DepthwiseConvolution& d, int64_t parallelism, const std::string& name);
  Status ExecuteConvolution(char** frame, ExecuteContext& context, const std::string& name) const;
  Status ExecuteFewPositions(char** frame, ExecuteContext& context) const;
  Status ExecuteDepthwise(char** frame, ExecuteContext& context) const;
  Status ExecuteMasked(char** frame, ExecuteContext& context, const std::string& name) const;
  Status ExecuteMaskedPackedKeys(char** frame, ExecuteContext& context, const std::string& name) const;
  // `element(b, stream)` for each batch element b, one part each on the pool (on the calling
  // thread where there is no pool or one element), each part a span of the trace and its oneDNN
  // on one OpenMP thread; a oneDNN error in any part is the call's error.
  Status RunPerBatchElement(ExecuteContext& context, const std::string& name,
                            const std::function<void(int64_t b, dnnl::stream& stream)>& element) const;
  // Builds contraction_blocks where the product's lhs is such a fusion (onednn_masked_contraction.cc).
  bool BuildMaskedContraction(const HloInstruction& fusion, const OneDnnCall& call, int64_t m, int64_t k, int64_t n,
                              bool rhs_transposed,
                              const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes);
  Status ExecuteMaskedContraction(char** frame, ExecuteContext& context, const std::string& name) const;
  // A masked product's block of batch element `b`, bound: its rows of the lhs, `weights` (its
  // first column of keys, as they lie or packed), its output (MaskedBlockOutput, dense) and its
  // addends.
  const Part& BindMaskedBlock(char** frame, int64_t b, const MaskedBlock& block, const float* weights,
                              std::unordered_map<int, dnnl::memory>& args) const;
  // Where the block's first output belongs; the block is written there dense, rows `columns`
  // apart, as oneDNN's brgemm takes no output with a longer row than its own.
  float* MaskedBlockOutput(char** frame, int64_t b, const MaskedBlock& block) const;
  // A block narrower than the output, moved from its dense rows into place; nothing otherwise.
  void PlaceMaskedBlock(char** frame, int64_t b, const MaskedBlock& block) const;
  Status ExecuteSplitK(char** frame, ThreadPool* pool, ExecuteContext& context, const std::string& name) const;
  // False, having done nothing, where the output shares a buffer with an operand. A call that
  // runs its parts on the caller as one counts in `whole_runs`. Each part, traced, is a span
  // "<name> part <i>", as oneDNN's parts are.
  bool ExecuteNarrow(char** frame, ExecuteContext& context, std::atomic<int64_t>& whole_runs,
                     const std::string& name) const;
  void SumAddendsInto(char** frame, const Part& part, float* output, int64_t dst_offset, int64_t bias_offset) const;
  // The addends of `post_ops` for the output's rows from `first_row` on (rows n apart), as
  // ApplySmallProductPostOps reads them: a full addend from that row, the others as they lie. In
  // a buffer of the calling thread's, reused from call to call (no allocation on the product's
  // path), valid until that thread's next call.
  const std::vector<const float*>& AddendsFromRow(char** frame, int64_t first_row, int64_t n) const;
  // own_post_ops over `rows` x `cols` of the output from `out`, its rows `stride` apart; `offset`
  // is out's element offset in the output (where a full addend is read) and `column` its first
  // column (where a last-dimension addend is).
  void ApplyOwnPostOps(char** frame, float* out, int64_t rows, int64_t cols, int64_t stride, int64_t offset,
                       int64_t column) const;
  // weights_gather for weights_reorder, where the weights are few: found by running the reorder
  // once on each element's own index (exact in f32 to 2^24); left empty where that does not
  // give every element one place.
  void BuildWeightsGather();
  // The weights `user` gathered into oneDNN's layout (weights_gather), in a buffer of the calling
  // thread's, valid until its next call.
  float* GatherWeights(const float* user) const;
  void BuildBands(const OneDnnConvolution& c, int64_t count, const dnnl::memory::desc& weights_md,
                  const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes);
};

}  // namespace xlens::runtime

#endif  // XLENS_HAVE_ONEDNN
