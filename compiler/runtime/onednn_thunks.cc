#include "compiler/runtime/onednn_thunks.h"

#include <fmt/format.h>

#include "compiler/passes/onednn_rewriter.h"
#include "compiler/runtime/narrow_product.h"
#include "compiler/runtime/product_mask.h"
#include "compiler/runtime/small_product.h"
#include "compiler/runtime/transposed_copy.h"

#ifdef XLENS_HAVE_ONEDNN
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "compiler/runtime/onednn_thunk_parts.h"
#endif

namespace xlens::runtime {

#ifndef XLENS_HAVE_ONEDNN

bool OneDnnAvailable() { return false; }
bool IsOneDnnFusion(const HloInstruction&) { return false; }
int64_t SmallProductLimit() { return 0; }
void SetSmallProductLimit(int64_t) {}
struct OneDnnThunk::Impl {};
OneDnnThunk::OneDnnThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
OneDnnThunk::~OneDnnThunk() = default;
StatusOr<std::unique_ptr<OneDnnThunk>> OneDnnThunk::Create(std::string hlo_name,
                                                           const HloInstruction&,
                                                           std::vector<int64_t>, int64_t) {
  return Error(hlo_name + ": this build has no oneDNN");
}
Status OneDnnThunk::Execute(char**, ExecuteContext&) const { return Error("no oneDNN"); }
std::string OneDnnThunk::ToString(int) const { return ""; }
int64_t OneDnnThunk::Parts() const { return 0; }
double OneDnnThunk::ComputedShare() const { return 1; }
bool OneDnnThunk::ReordersWeights() const { return false; }
int64_t OneDnnThunk::ColumnBlockWeightsSlot() const { return -1; }

#else

using namespace onednn_detail;

namespace {

// A forward convolution with a 1x1 window, unit strides and no padding over channels-last images
// is the product [images x pixels, in] x [in, out]. Its weights, unless they are constants
// (reordered once and kept), would be reordered into oneDNN's blocked layout on every call, or
// read as they lie by its im2col kernel (gemm:jit); as a matmul, brgemm reads them as they lie
// (any order of the two channel dimensions) and the rows are split over the pool as any
// product's are. Measured in ResNet50 at batch 1 (64x64 images), the 23 such layers that went to
// gemm:jit took 16.4 ms of a step there and 5.1 ms as matmuls.
struct PointwiseProduct {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool lhs_transposed = false, rhs_transposed = false;

  static std::optional<PointwiseProduct> Of(const OneDnnCall& call, bool constant_weights) {
    const OneDnnConvolution& c = call.convolution;
    if (!call.is_convolution || constant_weights || c.kind != OneDnnConvolution::Kind::kForward || c.groups > 1) {
      return std::nullopt;
    }
    // At most 32 output positions run in the convolution's own loops (few_position_convolution.h):
    // there a call's fixed cost is much of the product (DenseNet121's 1x1 layers on 2x2 images).
    if (std::optional<FewPositionConvolution> few = FewPositionConvolutionOf(c); few && few->Positions() <= 32) {
      return std::nullopt;
    }
    auto all = [](const std::vector<int64_t>& v, int64_t x) {
      return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
    };
    if (!all(c.kernel_spatial, 1) || !all(c.strides, 1) || !all(c.padding_low, 0) || !all(c.padding_high, 0) ||
        c.src_spatial != c.dst_spatial || c.weights_strides.size() < 2) {
      return std::nullopt;
    }
    PointwiseProduct p;
    p.m = c.images;
    for (int64_t d : c.src_spatial) p.m *= d;
    p.k = c.input_channels;
    p.n = c.output_channels;
    const int64_t out_stride = c.weights_strides[0], in_stride = c.weights_strides[1];
    if (in_stride == p.n && out_stride == 1) {
      p.rhs_transposed = false;  // [in, out] row-major (HWIO, IOHW)
    } else if (out_stride == p.k && in_stride == 1) {
      p.rhs_transposed = true;  // [out, in] row-major (OIHW, OHWI)
    } else {
      return std::nullopt;
    }
    return p;
  }
};

}  // namespace

bool OneDnnAvailable() { return true; }

namespace {
// About the size at which a oneDNN call's fixed cost (1.5 us) is its brgemm kernel's time for the
// product: measured on the LSTM and attention products of the model corpus.
std::atomic<int64_t> small_product_limit{int64_t{1} << 15};
}  // namespace

// The multiply-adds that make a part of the narrow and short-k loops worth a thread: half what a
// oneDNN part takes (2^18 above), as the loops start at once and run the MLP step's 128x256x10
// products in 7.9 (x w), 6.9 (x^T g) and 6.2 us (g w^T) on one thread, 5.3, 4.2 and 3.7 us in two
// parts (best of 1500 steps, 3 alternating rounds beside other work).
constexpr int64_t kNarrowPartMultiplyAdds = int64_t{1} << 17;
// Narrow products with an rhs to pack are split in k rather than rows where a part of rows would
// have at most kNarrowSplitKMaxRows rows and k is at least kNarrowSplitKMinK (where
// impl.narrow_split_k is set below: measured to 128 rows and from 784 elements of k; at 256 it
// lost, the MLP step's [128,256]x[256,10] 5.1 -> 6.2 us a product, higher in 6 of 6 alternating
// processes).
constexpr int64_t kNarrowSplitKMaxRows = 128;
constexpr int64_t kNarrowSplitKMinK = 512;

int64_t SmallProductLimit() { return small_product_limit.load(); }
void SetSmallProductLimit(int64_t multiply_adds) { small_product_limit.store(multiply_adds); }

bool IsOneDnnFusion(const HloInstruction& fusion) { return MatchOneDnnCall(fusion).has_value(); }


OneDnnThunk::OneDnnThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
OneDnnThunk::~OneDnnThunk() = default;

StatusOr<std::unique_ptr<OneDnnThunk>> OneDnnThunk::Create(std::string hlo_name,
                                                           const HloInstruction& fusion,
                                                           std::vector<int64_t> operand_slots,
                                                           int64_t output_slot) {
  std::optional<OneDnnCall> call = MatchOneDnnCall(fusion);
  if (!call) return Error(hlo_name + ": not a oneDNN fusion");
  std::unique_ptr<OneDnnThunk> thunk(new OneDnnThunk(std::move(hlo_name)));
  thunk->impl_ = std::make_unique<Impl>();
  Impl& impl = *thunk->impl_;
  impl.constant_weights = fusion.operand(call->rhs_parameter)->opcode() == HloOpcode::kConstant;
  const std::optional<PointwiseProduct> pointwise = PointwiseProduct::Of(*call, impl.constant_weights);
  impl.is_convolution = call->is_convolution && !pointwise;
  impl.lhs_slot = operand_slots.at(call->lhs_parameter);
  impl.rhs_slot = operand_slots.at(call->rhs_parameter);
  impl.lhs_offset = call->lhs_offset;
  impl.rhs_offset = call->rhs_offset;
  impl.output_slot = output_slot;
  const HloInstruction& core = *call->core;
  const int64_t parallelism = ThreadPool::Default().parallelism();

  dnnl::post_ops post_ops;
  for (size_t i = 0; i < call->post_ops.size(); ++i) {
    const OneDnnPostOp& op = call->post_ops[i];
    switch (op.kind) {
      case OneDnnPostOp::Kind::kAdd:
        impl.addend_post_ops.push_back(static_cast<int>(i));
        impl.addend_slots.push_back(operand_slots.at(op.parameter));
        impl.addend_kinds.push_back(op.addend);
        break;
      case OneDnnPostOp::Kind::kRelu:
      case OneDnnPostOp::Kind::kRelu6:
      case OneDnnPostOp::Kind::kGeluTanh:
      case OneDnnPostOp::Kind::kGeluErf:
      case OneDnnPostOp::Kind::kLinear:
      case OneDnnPostOp::Kind::kLogistic:
        break;
    }
  }
  // oneDNN's parts apply the post-ops before the first ReLU; the thunk applies the rest
  // (own_post_ops) to each part's output right after its call, while it is in cache. No post-op
  // of oneDNN 2.6 keeps the NaN (eltwise_relu, clip, clip_v2, bounded_relu and binary_max with 0
  // all give 0; a ReLU of nonzero alpha keeps it but is no ReLU). On the 8x32x32x64 3x3
  // convolution with a ReLU (8 parts of 256 KiB), the pass is 1.2% of the module's CPU samples;
  // against eltwise_relu in the call (25 rounds of processes, each binary in turn), its best
  // 2.590 ms against 2.597 and its CPU time the same (0.40 s a process), where the ReLU left to
  // a loop of its own after the call (a pass over the whole output, out of the parts' caches)
  // took 0.41 s and a median 5% higher.
  // A tanh GELU is the thunk's too where the CPU has AVX-512 (OneDnnPostOpAppliedByThunk;
  // ApplySmallProductPostOps: 16 elements a step, one exponential each): oneDNN 2.6 computes it
  // at some 1.3-1.6 G elements/s a core (onednn_rewriter.cc), and a loop of its own after the
  // call is one more kernel, whose threads read the whole result again out of the parts' caches.
  // The GELU MLP's first product (two column parts of 256x1024): each part 0.06-0.10 ms longer
  // at its best, against 0.13 ms at best (0.21-0.23 median) for the loop after it.
  const size_t own_from = static_cast<size_t>(
      std::find_if(call->post_ops.begin(), call->post_ops.end(), OneDnnPostOpAppliedByThunk) -
      call->post_ops.begin());
  impl.own_post_ops.assign(call->post_ops.begin() + own_from, call->post_ops.end());
  impl.own_addends_from = static_cast<size_t>(
      std::count_if(call->post_ops.begin(), call->post_ops.begin() + own_from,
                    [](const OneDnnPostOp& op) { return op.kind == OneDnnPostOp::Kind::kAdd; }));
  // The post-ops for a part whose addends are `addends` (in post-op order).
  auto attributes = [&](const std::vector<dnnl::memory::desc>& addends) -> dnnl::primitive_attr {
    dnnl::post_ops po;
    size_t next = 0;
    for (size_t i = 0; i < own_from; ++i) {
      const OneDnnPostOp& op = call->post_ops[i];
      switch (op.kind) {
        case OneDnnPostOp::Kind::kAdd:
          po.append_binary(dnnl::algorithm::binary_add, addends[next++]);
          break;
        case OneDnnPostOp::Kind::kRelu:  // never before own_from
        case OneDnnPostOp::Kind::kRelu6:
          break;
        case OneDnnPostOp::Kind::kGeluTanh:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kGeluErf:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kLinear:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, static_cast<float>(op.alpha),
                            LinearPostOpBeta(op));
          break;
        case OneDnnPostOp::Kind::kLogistic:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
          break;
      }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    // Parts run at once on several threads; oneDNN's own scratchpad is one global buffer unless
    // built for concurrent execution, so each thread passes its own.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  };
  // Column parts with addends: gemm:jit takes no binary post-op (its parts would run on the
  // reference kernel), but it takes oneDNN's sum, which adds the product to what the output holds.
  // Where every add comes before the activations, each part first writes the sum of its addends
  // into its block of the output and the product is summed onto it, the activations after.
  bool adds_first = true, activation_seen = false;
  for (const OneDnnPostOp& op : call->post_ops) {
    if (op.kind != OneDnnPostOp::Kind::kAdd) activation_seen = true;
    else if (activation_seen) adds_first = false;
  }
  auto summed_attributes = [&]() -> dnnl::primitive_attr {
    std::vector<dnnl::memory::desc> none(impl.addend_kinds.size());
    dnnl::primitive_attr binary = attributes(none);
    dnnl::post_ops po;
    po.append_sum(1.f);
    const dnnl::post_ops all = binary.get_post_ops();
    for (int i = 0; i < all.len(); ++i) {
      if (all.kind(i) != dnnl::primitive::kind::eltwise) continue;
      float scale, alpha, beta;
      dnnl::algorithm algorithm;
      all.get_params_eltwise(i, scale, algorithm, alpha, beta);
      po.append_eltwise(scale, algorithm, alpha, beta);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  };
  try {
    SingleOpenMpThread single_openmp_thread;  // primitives sized for one thread, as they run
    if (!impl.is_convolution) {
      PointwiseProduct product;
      if (pointwise) {
        product = *pointwise;
      } else {
        const Shape& lhs = core.operand(0)->shape();  // [batch..., m, k] as the dot reads it
        const Shape& rhs = core.operand(1)->shape();  // [batch..., k, n]
        const int64_t rank = lhs.rank();
        for (int64_t i = 0; i < rank - 2; ++i) product.batch *= lhs.dimensions(i);
        product.m = lhs.dimensions(rank - 2);
        product.k = lhs.dimensions(rank - 1);
        product.n = rhs.dimensions(rank - 1);
        product.lhs_transposed = call->lhs_transposed;
        product.rhs_transposed = call->rhs_transposed;
      }
      impl.batch = product.batch;
      const int64_t m = product.m, k = product.k, n = product.n;
      const bool lhs_transposed = product.lhs_transposed, rhs_transposed = product.rhs_transposed;
      impl.small = impl.batch * m * n * k <= SmallProductLimit();
      if (impl.small) {
        impl.small_shape = {impl.batch, m, k, n, lhs_transposed, rhs_transposed};
        impl.post_ops = call->post_ops;
        impl.implementation = std::string("small-product:") + SmallProductIsa();
      }
      // Enough parts for every thread, split along rows or columns (below). A block of rows
      // keeps every operand dense, which oneDNN's brgemm kernels need; a block of columns is a
      // strided matrix they refuse, leaving it to gemm:jit.
      auto build = [&](bool split_rows) {
        impl.parts.clear();
        impl.split_rows = split_rows;
        const int64_t extent = split_rows ? m : n;
        // Parts of at least 4 rows or columns and 2^18 multiply-adds (about 5 us of a core at
        // oneDNN's speed): a smaller product is not worth waking a thread for. The MNIST step's
        // 100x784x10 and 10x100x784 products (784K each) run in two parts: oneDNN's own two
        // threads take 0.012 and 0.010 ms for them where one takes 0.022 and 0.014, and so do
        // the parts with the pool's worker awake (0.012 ms each at best, against 0.022 and 0.015
        // in one part; the step 0.030 against 0.042 ms at best). Under load the pool runs such a
        // loop inline for a while, and the product then runs whole (Impl::whole): the step's
        // median stays at 0.042 ms (load 3-4.5 on the two cores), where its parts one after the
        // other took 0.045.
        const int64_t worth = std::max<int64_t>(1, impl.batch * m * n * k / (int64_t{1} << 18));
        const int64_t per_batch = std::clamp<int64_t>((std::min(parallelism, worth) + impl.batch - 1) / impl.batch,
                                                      1, std::max<int64_t>(1, extent / 4));
        impl.total = extent;
        impl.block = (extent + per_batch - 1) / per_batch;
        impl.blocks = (extent + impl.block - 1) / impl.block;
        // A product of tens of microseconds in parts is also kept whole, for when the pool would
        // run its parts inline (Impl::whole).
        impl.whole = impl.batch == 1 && impl.blocks > 1 && m * n * k < (int64_t{1} << 22);
        bool reference = false;
        for (int64_t count : {impl.block, extent - (impl.blocks - 1) * impl.block, impl.whole ? extent : impl.block}) {
          if (impl.parts.count(count)) continue;
          const int64_t rows = split_rows ? count : m, cols = split_rows ? n : count;
          Impl::Part part;
          // A transposed operand is stored [.., k, m] (or [.., n, k]): the same logical matrix
          // with swapped strides; a part keeps the full matrices' leading dimensions.
          part.src = dnnl::memory::desc({rows, k}, dt::f32, lhs_transposed ? dims{1, m} : dims{k, 1});
          if (lhs_transposed && rows < m) {
            part.pack_src = true;
            part.pack_lda = m;
            part.src = dnnl::memory::desc({rows, k}, dt::f32, dims{k, 1});
          }
          part.weights = dnnl::memory::desc({k, cols}, dt::f32, rhs_transposed ? dims{1, k} : dims{n, 1});
          part.dst = dnnl::memory::desc({rows, cols}, dt::f32, dims{n, 1});
          for (OneDnnPostOp::Addend a : impl.addend_kinds) {
            if (a == OneDnnPostOp::Addend::kFull) {
              part.addends.push_back(dnnl::memory::desc({rows, cols}, dt::f32, dims{n, 1}));
            } else if (a == OneDnnPostOp::Addend::kLastDimension) {
              part.addends.push_back(dnnl::memory::desc({1, cols}, dt::f32, dims{cols, 1}));
            } else {
              part.addends.push_back(dnnl::memory::desc({1, 1}, dt::f32, dims{1, 1}));
            }
          }
          dnnl::matmul::desc desc(part.src, part.weights, part.dst);
          impl.sum_addends = !split_rows && !impl.addend_kinds.empty() && adds_first;
          dnnl::matmul::primitive_desc pd(desc, impl.sum_addends ? summed_attributes() : attributes(part.addends),
                                          CpuEngine());
          part.primitive = dnnl::matmul(pd);
          part.scratchpad = pd.scratchpad_desc();
          // The listing names the kernel the parts run (the block's; the parts are built
          // first), and the whole product's where oneDNN picked another for it.
          const std::string kernel = pd.impl_info_str();
          reference |= kernel.rfind("ref", 0) == 0;
          if (count == impl.block) {
            impl.implementation = kernel;
          } else if (impl.whole && count == extent && kernel != impl.implementation) {
            impl.implementation += " (whole: " + kernel + ")";
          }
          impl.parts.emplace(count, std::move(part));
        }
        return !reference;
      };
      // With too few rows to share, a product small enough to run in tens of microseconds is
      // split in rows all the same (of at least 4 a part) rather than going to gemm:jit in
      // column blocks.
      // A pointwise convolution's weights split in columns would go to gemm:jit as well (measured:
      // DenseNet121's 1024-to-512 one on 4x4 images 3x slower on two threads than brgemm on one).
      const bool rows_suffice = m >= 16 * std::min<int64_t>(parallelism, 2) || m >= n || pointwise;
      const bool small = impl.batch * m * n * k < (int64_t{1} << 22);
      // A product much wider than it is tall (n >= 4m: its weights outweigh its lhs four times)
      // is split in columns even where rows suffice: each part then reads its share of the
      // weights instead of all of them, as oneDNN's own threads share such a product. Measured
      // on this project's machine (AVX-512, one thread per part, CPU time per part of two): the
      // LSTM step's 64x512x2048 0.75 ms in columns (gemm:jit) against 0.89 ms in rows (brgemm)
      // with its weights in cache and 1.0 ms without; 64x256x2048 0.35 against 0.39-0.50; the
      // GELU MLP's 256x512x2048 2.66 against 2.81. Narrower products lost in columns (the MLP
      // step's 128x784x256, 6% slower in the step), and so did a transposed lhs (packed per
      // block of rows instead: its 256x128x784 weight gradient 15% slower on gemm:jit). gemm:jit
      // generates its kernels once per process, at its first call (about 45 ms). A product with
      // a bias or another addend has them summed into its output first (summed_attributes), as
      // gemm:jit takes no binary post-op: the LSTM step's 64x256x2048 product with the other's
      // result and the bias added. Weights of 2 MiB or more (twice a core's L2 here) are split
      // in columns whatever the shape: in rows every thread streams all of them from the shared
      // LLC for its rows, at once with the others (the GELU MLP's 256x2048x512 second product, 4
      // MiB of weights: the step's CPU time on two threads 3-6% lower in columns, 11.1-11.4
      // against 11.7-11.8 ms; 5.0 against 5.1-5.3 ms for that product on one thread). Batched
      // products keep their batch parts; pointwise convolutions and blocks of fewer than 64
      // columns or 32 rows keep their rows (gemm:jit was slower there: see above).
      const bool large_weights = k * n * static_cast<int64_t>(sizeof(float)) >= (int64_t{2} << 20);
      const bool columns_read_less = impl.batch == 1 && !pointwise && !small && !lhs_transposed &&
                                     (n >= 4 * m || large_weights) && m >= 32 &&
                                     n >= 64 * std::min<int64_t>(parallelism, 2);
      // A contraction at least four times the output's columns (k >= 4n) in a product that columns
      // would take is split in k instead: each part reads its share of the lhs's columns and of
      // the weights' rows, which stay dense, and writes a partial product of the output's size
      // (m x n, a quarter of the lhs's bytes or less), added up after the parts. In columns
      // every part reads all of the lhs, in rows all of the weights. Measured (AVX-512, one
      // thread per part, best of 100 calls in three rounds alternating the splits in one
      // process beside other work): the GELU MLP's second product 256x2048x512 2.57-2.61 ms in k
      // (gemm:jit, the sum included) against 2.74-2.87 in columns and 2.79-2.94 in rows (oneDNN
      // on its own two threads 2.44-2.48); its first, 256x512x2048 (k = n/4), lost in k (3.35
      // against 2.84 in columns). Measured without post-ops, and kept to products without them.
      // A product that rows would take, whose lhs another library call reads transposed (the
      // forward x.w of a training step, whose weight gradient x^T g follows), is split in k as
      // well, post-ops and all (applied to the sum, by the loop that adds the partial products):
      // each part then reads the columns of x and the rows of w that the gradient's part on the
      // same thread reads next (its row parts are x's columns, and an update of w reads w's
      // rows), so the gradient's transposed-lhs pack and its update find them in that core's L2
      // instead of the other core's. Not with an addend of the output's shape, which may share
      // the output's buffer (a residual added in place) that the first part overwrites before
      // the sum reads it. Measured on the MLP training step (forward 128x784x256 with a bias;
      // one binary, the rule on and off alternating, load 3.6-6.5): in traced runs
      // (tests/bench/calls_vs_floors.py, 2 rounds of 300 runs, twice) the forward call's best
      // 122-125 against 138-142 us and the gradient's 137-139 against 158-165; untraced, the
      // step gains less: `xlens run` 1000 runs a process, best lower in 15 of 16 pairs, median
      // of the bests 0.3055 against 0.311 ms (2%), medians within noise. Alone, a product gains
      // nothing from it (128x784x256, 128x2048x384, 64x1024x256, 32x2048x128 with a bias, 6
      // process pairs each: bests within 4% either way), hence the condition on the lhs's reader.
      bool no_full_addend = true;
      for (OneDnnPostOp::Addend a : impl.addend_kinds) no_full_addend &= a != OneDnnPostOp::Addend::kFull;
      bool lhs_read_transposed = false;
      const HloInstruction* lhs_operand = fusion.operand(call->lhs_parameter);
      for (const HloInstruction* user : lhs_operand->users()) {
        if (user == &fusion || user->opcode() != HloOpcode::kFusion) continue;
        std::optional<OneDnnCall> other = MatchOneDnnCall(*user);
        lhs_read_transposed |= other && other->lhs_transposed && user->operand(other->lhs_parameter) == lhs_operand;
      }
      const bool rows_read_more = impl.batch == 1 && !pointwise && !small && !columns_read_less && !lhs_transposed &&
                                  !rhs_transposed && no_full_addend && n >= 64 && lhs_read_transposed;
      const bool k_reads_less =
          rows_read_more || (columns_read_less && call->post_ops.empty() && !rhs_transposed && k >= 4 * n);
      auto build_k = [&]() -> bool {
        impl.parts.clear();
        const int64_t worth = std::max<int64_t>(1, m * n * k / (int64_t{1} << 18));
        const int64_t count = std::max<int64_t>(1, std::min(parallelism, worth));
        // Blocks of k at least n long, so that no part's partial product outweighs its share of
        // the lhs; with more threads than that (k < count * n) the product stays in columns.
        if (k < count * n) return false;
        impl.total = k;
        impl.block = (k + count - 1) / count;
        impl.blocks = (k + impl.block - 1) / impl.block;
        if (impl.blocks < 2) return false;
        for (int64_t extent : {impl.block, k - (impl.blocks - 1) * impl.block}) {
          if (impl.parts.count(extent)) continue;
          Impl::Part part;
          part.src = dnnl::memory::desc({m, extent}, dt::f32, dims{k, 1});
          part.weights = dnnl::memory::desc({extent, n}, dt::f32, dims{n, 1});
          part.dst = dnnl::memory::desc({m, n}, dt::f32, dims{n, 1});
          // No post-ops in the parts: they apply to the sum (ExecuteSplitK).
          dnnl::primitive_attr plain;
          plain.set_scratchpad_mode(dnnl::scratchpad_mode::user);
          dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(part.src, part.weights, part.dst), plain, CpuEngine());
          const std::string kernel = pd.impl_info_str();
          if (kernel.rfind("ref", 0) == 0) {
            impl.parts.clear();
            return false;
          }
          part.primitive = dnnl::matmul(pd);
          part.scratchpad = pd.scratchpad_desc();
          if (extent == impl.block) impl.implementation = kernel + ", split in k";
          impl.parts.emplace(extent, std::move(part));
        }
        impl.split_k = true;
        impl.post_ops = call->post_ops;
        return true;
      };
      // Only the columns the consumer reads (product_mask.h), in blocks of 64 rows against keys
      // packed once per batch element (below), or else of 128 rows: a causal mask's 512x512
      // scores in 4 blocks compute 62.5% of the product. A block's columns are rounded out to 16
      // (a vector) and read as rows of a transposed rhs, which stay dense; a plain rhs's block
      // of columns would be strided (gemm:jit), so it is left whole.
      // Other blockings of causal attention's 8x512x64x512 scores, measured against these (best
      // of each process's 100 runs, 8 alternating processes a blocking, load 5-7 on 2 cores): the
      // call's best 0.97-1.00 ms here; 64 rows a block (56% computed) 0.96-0.98, as each block
      // packs its keys again (2304 key columns a head against 1280); 32 rows 1.15; the blocks
      // written in place (brgemm takes no output rows longer than its own, so every narrower
      // block runs on gemm:jit) 0.99-1.09; 32 columns a block over the rows that read them
      // (each key packed once, in place, gemm:jit) 1.11; 64 rows a block over all 8 heads in
      // one call (the floor's blocking, gemm:jit) 1.15. On one core (taskset) all of them take
      // 1.85-2.01 ms, where oneDNN standalone takes 1.41-1.45 for the 64-row blocks over all
      // heads: the gap is not in the blocking.
      auto build_masked = [&]() -> bool {
        if (pointwise || lhs_transposed || !rhs_transposed) return false;
        for (OneDnnPostOp::Addend a : impl.addend_kinds) {
          if (a == OneDnnPostOp::Addend::kFull) return false;
        }
        // The fusion's result is the product's [batch..., m, n], as the parts write it.
        const Shape& result = fusion.shape();
        if (!result.IsArray() || result.rank() < 2 || result.dimensions(result.rank() - 1) != n ||
            result.num_elements() != impl.batch * m * n) {
          return false;
        }
        std::optional<std::vector<ColumnRange>> ranges = ReadColumnsPerRow(fusion);
        if (!ranges || static_cast<int64_t>(ranges->size()) != m) return false;
        // Blocks of `rows_per_block` rows, each against its rows' columns rounded out to
        // `align` (their end to `end_align`, where it is given); `computed` counts their outputs.
        int64_t computed = 0;
        auto blocks_of = [&](int64_t rows_per_block, int64_t align, int64_t end_align = 0) {
          if (end_align == 0) end_align = align;
          std::vector<Impl::MaskedBlock> blocks;
          computed = 0;
          for (int64_t r0 = 0; r0 < m; r0 += rows_per_block) {
            const int64_t rows = std::min(rows_per_block, m - r0);
            int64_t begin = n, end = 0;
            for (int64_t r = r0; r < r0 + rows; ++r) {
              const ColumnRange& c = (*ranges)[r];
              if (c.begin >= c.end) continue;
              begin = std::min(begin, c.begin);
              end = std::max(end, c.end);
            }
            if (begin >= end) continue;  // no column of these rows is read
            begin = begin / align * align;
            end = std::min(n, (end + end_align - 1) / end_align * end_align);
            blocks.push_back({r0, rows, begin, end - begin});
            computed += rows * (end - begin);
          }
          return blocks;
        };
        auto part_for = [&](const Impl::MaskedBlock& b, const dnnl::memory::desc& weights) {
          Impl::Part part;
          part.src = dnnl::memory::desc({b.rows, k}, dt::f32, dims{k, 1});
          part.weights = weights;
          part.dst = dnnl::memory::desc({b.rows, b.columns}, dt::f32, dims{b.columns, 1});
          for (OneDnnPostOp::Addend a : impl.addend_kinds) {
            part.addends.push_back(a == OneDnnPostOp::Addend::kLastDimension
                                       ? dnnl::memory::desc({1, b.columns}, dt::f32, dims{b.columns, 1})
                                       : dnnl::memory::desc({1, 1}, dt::f32, dims{1, 1}));
          }
          dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(part.src, part.weights, part.dst),
                                          attributes(part.addends), CpuEngine());
          part.primitive = dnnl::matmul(pd);
          part.scratchpad = pd.scratchpad_desc();
          return std::make_pair(std::move(part), std::string(pd.impl_info_str()));
        };
        // The keys packed once per batch element into brgemm's own blocked layout for the
        // weights (BA16a64b: 64 keys by 16 of k a tile), where every block of rows reads the
        // columns it needs as they lie, so that no block packs its keys again: then the blocks
        // are 64 rows (a causal mask's 512x512 scores: 56% computed, where 128-row blocks
        // compute 62.5%; 2304 key columns packed a head in 64-row blocks, 512 now). Causal
        // attention's 8x512x64x512 q.k, best of each process's 400 runs, 6 alternating pairs
        // against 128-row blocks packing their own keys (load 11-12 on 2 cores): 0.99-1.05 ms
        // (median 1.01) -> 0.86-0.97 (0.95), faster in every pair; on one core 1.84-2.14 ->
        // 1.78-1.98. Packed, 128-row blocks took 1.03-1.13 and 32-row 0.93-1.04 in the same
        // rounds as 0.92-1.05 for 64. What is left against oneDNN standalone (1.41-1.45 ms on one
        // core) is mostly the copies of the blocks narrower than the output into place (memcpy
        // 4-6% of a one-core run's samples, the packing 2%).
        // Each batch element is one part on the pool (its keys packed once by the thread that
        // runs its blocks), so packed keys need as many elements as the pool has threads: a
        // single head's causal 2048x64x2048, packed, ran whole on one thread (best 3.98-6.65 ms,
        // load about 8) where its 128-row blocks spread over the pool took 2.08-2.71.
        // A block starts at a band of the packed keys (the layout at an offset) and ends at a
        // multiple of 16, where brgemm's tail takes the band's first columns: a causal mask
        // shifted by k (jnp.tril(x, k), a KV cache's offset) computes up to 15 columns a row past
        // its prefix, not up to 63. Causal attention's 8x512x64x512 q.k under tril(x, 3): 69% of
        // the scores computed at 64 columns, 59% at 16.
        std::vector<Impl::MaskedBlock> blocks;
        if (k % kPackedKeysK == 0 && impl.batch >= parallelism) {
          blocks = blocks_of(64, kPackedKeysN, 16);
          bool brgemm = 4 * computed <= 3 * m * n;
          for (const Impl::MaskedBlock& b : blocks) {
            const std::pair<int64_t, int64_t> key{b.rows, b.columns};
            if (!brgemm || impl.masked_parts.count(key)) continue;
            auto [part, kernel] = part_for(b, dnnl::memory::desc({k, b.columns}, dt::f32,
                                                                 dnnl::memory::format_tag::BA16a64b));
            brgemm = kernel.rfind("brg", 0) == 0;
            impl.implementation = kernel + ", keys packed";
            impl.masked_parts.emplace(key, std::move(part));
          }
          if (brgemm) {
            impl.masked_packed_keys = true;
          } else {
            impl.masked_parts.clear();
          }
        }
        if (!impl.masked_packed_keys) {
          blocks = blocks_of(std::min<int64_t>(m, 128), 16);
          if (4 * computed > 3 * m * n) return false;  // not worth the copies and the calls
          for (const Impl::MaskedBlock& b : blocks) {
            const std::pair<int64_t, int64_t> key{b.rows, b.columns};
            if (impl.masked_parts.count(key)) continue;
            auto [part, kernel] = part_for(b, dnnl::memory::desc({k, b.columns}, dt::f32, dims{1, k}));
            impl.implementation = kernel;
            impl.masked_parts.emplace(key, std::move(part));
          }
        }
        impl.masked_blocks = std::move(blocks);
        impl.blocks = static_cast<int64_t>(impl.masked_blocks.size());
        impl.masked_n = n;
        impl.masked_k = k;
        impl.masked_share = static_cast<double>(computed) / static_cast<double>(m * n);
        return true;
      };
      // The probabilities @ values of masked attention, over the columns of its contraction
      // where the probabilities can be nonzero (onednn_masked_contraction.cc).
      if (impl.small) {
        impl.blocks = 1;
      } else if (!(impl.own_post_ops.empty() && build_masked()) &&
                 !(!pointwise && impl.BuildMaskedContraction(fusion, *call, m, k, n, rhs_transposed, attributes)) &&
                 !(k_reads_less && build_k()) &&
                 !build(!columns_read_less && (rows_suffice || small))) {
        build(true);
      }
      // Output rows of at most kNarrowOutputColumns run in NarrowProduct's loops, in as many
      // parts of rows as built above. Measured on one core, best of 20000 calls with the rhs
      // packed on every call: the MNIST step's 100x784x10 0.0168 ms against oneDNN's 0.0216, the MLP
      // step's 128x256x10 0.0072 against 0.0092, the convolution step's 32x3136x10 0.0253
      // against 0.0277 (its [3136,10] rhs takes 4 us to pack).
      // A transposed lhs with an rhs stored [k, n] (a weight gradient x^T g) runs in
      // NarrowProductTransposedLhs's loops, which read both in place; their k is the trip count
      // of an outer loop, so a k of kNarrowTransposedLhsMinK is enough.
      impl.narrow = !impl.small && impl.masked_blocks.empty() && impl.batch == 1 &&
                    !(lhs_transposed && rhs_transposed) && n <= kNarrowOutputColumns &&
                    k >= (lhs_transposed ? kNarrowTransposedLhsMinK : 64) && NarrowProductAvailable();
      if (impl.narrow) {
        // As many parts as oneDNN's, in rows even where those are columns (few rows, a long k):
        // [8,50000]x[50000,12] in two parts of 4 rows, best of 300 calls 0.123-0.131 ms against
        // 0.173-0.181 whole on one thread; oneDNN's gemm:jit in two parts of 6 columns took 17
        // times the loops' time on one thread.
        impl.narrow_block = impl.split_rows ? impl.block : (m + impl.blocks - 1) / impl.blocks;
        impl.narrow_parts = (m + impl.narrow_block - 1) / impl.narrow_block;
        // And at least one part per kNarrowPartMultiplyAdds, in whole vectors of rows.
        {
          const int64_t parts = std::clamp<int64_t>(std::min<int64_t>(parallelism, m * n * k / kNarrowPartMultiplyAdds),
                                                    1, std::max<int64_t>(1, m / 16));
          if (parts > impl.narrow_parts) {
            impl.narrow_block = (m + parts * 16 - 1) / (parts * 16) * 16;
            impl.narrow_parts = (m + impl.narrow_block - 1) / impl.narrow_block;
          }
        }
        // Up to 128 rows a part and a long k: each part of rows packed the whole rhs
        // (PackNarrowRhs), the convolution step's [3136,10] 4 us of a part's 12. In as many parts
        // of k, each packs only its own rows of the rhs and reads half as much of it, and the
        // caller adds m x n partial sums. Two parts, 5 alternating processes of 2000 runs of 8
        // such products (xlens run, per product): [32,3136]x[3136,10] median 21.8 -> 18.5 us
        // (lower in 5 of 5), [100,784]x[784,10] 11.0 -> 9.7 (4 of 5), [64,1024]x[1024,10] 12.6 ->
        // 9.4 (5 of 5), [128,784]x[784,10] 15.1 -> 11.8 (5 of 5); [256,784]x[784,10] 28.7 -> 25.2
        // (4 alternating, 3 of 4); [8,50000]x[50000,12] one product 0.29-0.43 -> 0.17-0.20 ms.
        // In the convolution step (6 alternating processes, mean per run) the logits 24-34 -> 22-29
        // us, and the weight gradient x^T g after them 22-27 -> 16-20: its parts read x in the
        // same halves of k, now in their own core's cache.
        if (!lhs_transposed && !rhs_transposed && impl.narrow_parts > 1 && impl.narrow_block <= kNarrowSplitKMaxRows &&
            k >= kNarrowSplitKMinK) {
          const int64_t parts = impl.narrow_parts;
          impl.narrow_split_k = true;
          impl.narrow_block = (k + parts * 16 - 1) / (parts * 16) * 16;
          impl.narrow_parts = (k + impl.narrow_block - 1) / impl.narrow_block;
        }
        impl.small_shape = {1, m, k, n, lhs_transposed, rhs_transposed};
        impl.post_ops = call->post_ops;
        impl.implementation = impl.narrow_split_k ? "narrow-product:avx512, split in k" : "narrow-product:avx512";
      }
      // A short k (at most 16) with a transposed rhs, into wide rows: the gradient g w^T that
      // flows back through a classifier. ShortKProduct's loops, in parts of whole vectors of
      // columns. The convolution step's g [32,10], w [3136,10]: on one core 0.026 -> 0.021 ms a
      // run against oneDNN's brgemm; in the step (per-thunk times of 3 alternating rounds of 300
      // runs beside other work) best 26.8-27.6 -> 21.4-21.6 us, medians 35-40 -> 23-24. The MLP
      // step's g [128,10], w [256,10]: best 8.0-8.3 -> 6.2-6.5 us, medians 15-16 -> 9-11.
      if (!impl.narrow && !impl.small && impl.masked_blocks.empty() && impl.batch == 1 && !lhs_transposed &&
          rhs_transposed && k <= kNarrowProductMaxColumns && n >= 64 && call->post_ops.empty() &&
          NarrowProductAvailable()) {
        impl.narrow = impl.short_k = true;
        const int64_t parts = std::clamp<int64_t>(std::min<int64_t>(parallelism, m * n * k / kNarrowPartMultiplyAdds), 1, n / 16);
        impl.narrow_block = (n + parts * 16 - 1) / (parts * 16) * 16;
        impl.narrow_parts = (n + impl.narrow_block - 1) / impl.narrow_block;
        impl.small_shape = {1, m, k, n, false, true};
        impl.post_ops = call->post_ops;
        impl.implementation = "short-k-product:avx512";
      }
      impl.src_step = m * k;
      impl.src_row_step = lhs_transposed ? 1 : k;
      impl.weights_step = k * n;
      impl.weights_column_step = rhs_transposed ? k : 1;
      impl.dst_step = m * n;
      impl.dst_row_step = n;
    } else {
      RETURN_IF_ERROR(impl.BuildConvolution(*call, thunk->hlo_name(), parallelism, attributes));
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN refused {}: {}", thunk->hlo_name(), call->ToString(), e.what()));
  }
  thunk->description_ = call->ToString() + (pointwise ? " as matmul" : "");
  if (!impl.masked_blocks.empty()) {
    thunk->description_ += fmt::format(" on the {:.0f}% of its outputs read", 100 * impl.masked_share);
  }
  if (!impl.contraction_blocks.empty()) {
    thunk->description_ +=
        fmt::format(" over the {:.0f}% of its contraction where the lhs can be nonzero", 100 * impl.contraction_share);
  }
  thunk->implementation_ = impl.implementation;
  thunk->runs_inline_ = thunk->ComputeRunsInline();
  return thunk;
}

namespace {

// row[c] += from[c], in runs of 16 and then one by one: at -O2 GCC vectorizes only a loop whose
// vector code replaces it whole, which a run of known length is and a loop over `n` is not (the
// plain loop compiled to one scalar add an element, 4.5% of the LSTM step's CPU time).
void AddTo(float* __restrict row, const float* __restrict from, int64_t n) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    for (int j = 0; j < 16; ++j) row[c + j] += from[c + j];
  }
  for (; c < n; ++c) row[c] += from[c];
}

void AddTo(float* __restrict row, float x, int64_t n) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    for (int j = 0; j < 16; ++j) row[c + j] += x;
  }
  for (; c < n; ++c) row[c] += x;
}

// row[c] = a[c] + b[c], in AddTo's runs.
void SumTo(float* __restrict row, const float* __restrict a, const float* __restrict b, int64_t n) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    for (int j = 0; j < 16; ++j) row[c + j] = a[c + j] + b[c + j];
  }
  for (; c < n; ++c) row[c] = a[c] + b[c];
}

}  // namespace

// A column part's block of the output (all rows, the part's columns) set to the sum of its
// addends, for oneDNN's sum post-op to add the product onto: each row written from its first
// two addends in one pass (the LSTM's other product and its bias: a copy and then an add were two
// passes over each row) and added to from the others. A full addend that is the output itself (a
// residual updated in place) is already there.
void OneDnnThunk::Impl::SumAddendsInto(char** frame, const Part& part, float* output, int64_t dst_offset,
                                       int64_t bias_offset) const {
  const Impl& impl = *this;
  const dims d = part.dst.dims();
  const int64_t rows = d[0], cols = d[1];
  size_t in_place = impl.addend_slots.size();
  for (size_t a = 0; a < impl.addend_slots.size(); ++a) {
    if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kFull &&
        reinterpret_cast<float*>(frame[impl.addend_slots[a]]) == output) {
      in_place = a;
    }
  }
  // Addend a's stretch of row r, for those not scalar.
  auto stretch = [&](size_t a, int64_t r) {
    const float* addend = reinterpret_cast<const float*>(frame[impl.addend_slots[a]]);
    return addend + (impl.addend_kinds[a] == OneDnnPostOp::Addend::kFull ? dst_offset + r * impl.dst_row_step
                                                                         : bias_offset);
  };
  for (int64_t r = 0; r < rows; ++r) {
    float* row = output + dst_offset + r * impl.dst_row_step;
    bool written = in_place < impl.addend_slots.size();
    for (size_t a = 0; a < impl.addend_slots.size(); ++a) {
      if (a == in_place) continue;
      const float* addend = reinterpret_cast<const float*>(frame[impl.addend_slots[a]]);
      if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kScalar) {
        if (written) {
          AddTo(row, addend[0], cols);
        } else {
          std::fill(row, row + cols, addend[0]);
        }
      } else if (written) {
        AddTo(row, stretch(a, r), cols);
      } else if (a + 1 < impl.addend_slots.size() && impl.addend_kinds[a + 1] != OneDnnPostOp::Addend::kScalar) {
        // Nothing is in place here (the row would be written already).
        SumTo(row, stretch(a, r), stretch(a + 1, r), cols);
        ++a;
      } else {
        std::memcpy(row, stretch(a, r), cols * sizeof(float));
      }
      written = true;
    }
  }
}

const std::vector<const float*>& OneDnnThunk::Impl::AddendsFromRow(char** frame, int64_t first_row, int64_t n) const {
  thread_local std::vector<const float*> addends;
  addends.clear();
  for (size_t a = 0; a < addend_slots.size(); ++a) {
    const float* addend = reinterpret_cast<const float*>(frame[addend_slots[a]]);
    if (addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += first_row * n;
    addends.push_back(addend);
  }
  return addends;
}

void OneDnnThunk::Impl::ApplyOwnPostOps(char** frame, float* out, int64_t rows, int64_t cols, int64_t stride,
                                        int64_t offset, int64_t column) const {
  // Reused from call to call: no allocation on the part's path.
  thread_local std::vector<const float*> addends;
  auto point_addends = [&](int64_t row) {
    addends.clear();
    for (size_t a = own_addends_from; a < addend_slots.size(); ++a) {
      const float* addend = reinterpret_cast<const float*>(frame[addend_slots[a]]);
      if (addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += offset + row * stride;
      if (addend_kinds[a] == OneDnnPostOp::Addend::kLastDimension) addend += column;
      addends.push_back(addend);
    }
  };
  if (stride == cols) {
    point_addends(0);
    ApplySmallProductPostOps(own_post_ops, addends, rows, cols, out);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {  // a block of columns: row by row
    point_addends(r);
    ApplySmallProductPostOps(own_post_ops, addends, 1, cols, out + r * stride);
  }
}

Status OneDnnThunk::Impl::ExecuteSplitK(char** frame, ThreadPool* pool, ExecuteContext& context,
                                        const std::string& name) const {
  float* lhs = Lhs(frame);
  float* rhs = Rhs(frame);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  const dims d = parts.at(block).dst.dims();
  const int64_t m = d[0], n = d[1];
  // The caller's: the parts write into it from other threads, and it stays mapped from one call
  // to the next.
  thread_local std::vector<float> partials;
  const size_t size = static_cast<size_t>((blocks - 1) * m * n);
  if (partials.size() < size) partials.resize(size);
  float* partial = partials.data();
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args, dnnl::stream&) -> const Part& {
    const int64_t first = t * block;
    const Part& part = parts.at(std::min(block, total - first));
    BindArgument(args, DNNL_ARG_SRC, part.src, lhs + first);
    BindArgument(args, DNNL_ARG_WEIGHTS, part.weights, rhs + first * n);
    BindArgument(args, DNNL_ARG_DST, part.dst, t == 0 ? output : partial + (t - 1) * m * n);
    return part;
  };
  RETURN_IF_ERROR(ExecutePartsOnPool(pool, blocks, name, bind_part));
  // The partial products are added in a loop over the pool, not by the caller alone once the
  // parts are done (tried: ee9cd02). On the caller the sum was quicker from the last part's end
  // to the call's end (the GELU MLP's 256x2048x512, xlens run --trace, 6 alternating rounds of
  // 200 runs at load 8: median 0.035-0.038 against 0.051-0.073 ms), but the worker, idle
  // through it, slept more often before the next run's first product: that call's worker part
  // started 45-450 us after the call at the 25th percentile against 5-8 us, more than the sum
  // saved.
  auto add = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t p = 0; p + 1 < blocks; ++p) AddTo(output + r * n, partial + p * m * n + r * n, n);
    }
    if (post_ops.empty() || begin >= end) return;
    ApplySmallProductPostOps(post_ops, AddendsFromRow(frame, begin, n), end - begin, n, output + begin * n);
  };
  // The epilogue (part_epilogue.h: the ReLU a training step's forward keeps beside its
  // pre-activation) on the rows each task of the sum just wrote, while they are in its core's
  // L2, instead of a kernel of its own after the call over rows half of which the other core
  // wrote.
  const bool epilogue_per_rows = epilogue != nullptr && epilogue->Applies(frame);
  auto add_then_epilogue = [&](int64_t begin, int64_t end) {
    add(begin, end);
    if (epilogue_per_rows && begin < end) epilogue->RunImages(frame, context.scratch, begin, end - begin);
  };
  if (pool == nullptr) {
    add_then_epilogue(0, m);
  } else {
    // Chunks of 16 KiB of rows or more.
    pool->ParallelFor(m, std::max<int64_t>(1, 4096 / n), add_then_epilogue);
  }
  if (epilogue != nullptr && !epilogue_per_rows) return epilogue->RunWhole(frame, context);
  return OkStatus();
}

const OneDnnThunk::Impl::Part& OneDnnThunk::Impl::BindMaskedBlock(char** frame, int64_t b, const MaskedBlock& block,
                                                                   const float* weights,
                                                                   std::unordered_map<int, dnnl::memory>& args) const {
  const Part& part = masked_parts.at({block.rows, block.columns});
  BindArgument(args, DNNL_ARG_SRC, part.src, const_cast<float*>(Lhs(frame) + b * src_step + block.row * masked_k));
  BindArgument(args, DNNL_ARG_WEIGHTS, part.weights, const_cast<float*>(weights));
  BindArgument(args, DNNL_ARG_DST, part.dst, MaskedBlockOutput(frame, b, block));
  for (size_t a = 0; a < addend_slots.size(); ++a) {
    float* addend = reinterpret_cast<float*>(frame[addend_slots[a]]);
    if (addend_kinds[a] == OneDnnPostOp::Addend::kLastDimension) addend += block.column;
    BindArgument(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(addend_post_ops[a]) | DNNL_ARG_SRC_1, part.addends[a], addend);
  }
  return part;
}

float* OneDnnThunk::Impl::MaskedBlockOutput(char** frame, int64_t b, const MaskedBlock& block) const {
  return reinterpret_cast<float*>(frame[output_slot]) + b * dst_step + block.row * masked_n + block.column;
}

// Row r of the dense block lies at r * columns from the block's first output, and belongs at
// r * masked_n: the rows are moved last first, so that each lands past every row not yet moved
// (r * masked_n >= r * columns), and past its own start (memmove, for the rows that overlap
// their place). Every position the move writes is in the block's own rows of the output, and
// those outside the block's columns are never read (product_mask.h), so they may be left
// holding anything.
void OneDnnThunk::Impl::PlaceMaskedBlock(char** frame, int64_t b, const MaskedBlock& block) const {
  if (block.columns == masked_n) return;
  float* dst = MaskedBlockOutput(frame, b, block);
  for (int64_t r = block.rows - 1; r > 0; --r) {
    std::memmove(dst + r * masked_n, dst + r * block.columns, block.columns * sizeof(float));
  }
}

// Each block of rows computes its columns; blocks narrower than the output are written dense
// into their rows of it and then moved into place (PlaceMaskedBlock).
Status OneDnnThunk::Impl::ExecuteMasked(char** frame, ExecuteContext& context, const std::string& name) const {
  const int64_t per_batch = static_cast<int64_t>(masked_blocks.size());
  const float* rhs = Rhs(frame);
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args, dnnl::stream&) -> const Part& {
    const int64_t b = t / per_batch;
    const MaskedBlock& block = masked_blocks[t % per_batch];
    return BindMaskedBlock(frame, b, block, rhs + b * weights_step + block.column * masked_k, args);
  };
  auto place = [&](int64_t t) { PlaceMaskedBlock(frame, t / per_batch, masked_blocks[t % per_batch]); };
  return ExecutePartsOnPool(context.pool, batch * per_batch, name, bind_part, place);
}

namespace {

// keys [n, k] (row-major, k a multiple of 16) into oneDNN's BA16a64b for the [k, n] weights:
// per band of 64 keys, k/16 tiles of 16 x 64, each the transpose of 64 keys' 16 elements. A last
// band of fewer keys leaves its tiles' other columns as they were (oneDNN reads them into
// outputs it does not write).
void PackKeysBlocked(const float* keys, int64_t n, int64_t k, float* packed) {
  constexpr int64_t kN = kPackedKeysN, kK = kPackedKeysK;
  for (int64_t band = 0; band * kN < n; ++band) {
    const int64_t keys_in_band = std::min(kN, n - band * kN);
    float* tiles = packed + band * kN * k;
    for (int64_t tile = 0; tile * kK < k; ++tile) {
      TransposedCopy(keys + band * kN * k + tile * kK, keys_in_band, kK, k, tiles + tile * kK * kN, kN);
    }
  }
}

}  // namespace

// Each part is one batch element: its keys packed once (PackKeysBlocked), then each block of rows
// against the columns it reads there.
Status OneDnnThunk::Impl::ExecuteMaskedPackedKeys(char** frame, ExecuteContext& context,
                                                  const std::string& name) const {
  const float* rhs = Rhs(frame);
  const int64_t bands = (masked_n + kPackedKeysN - 1) / kPackedKeysN;
  return RunPerBatchElement(context, name, [&](int64_t b, dnnl::stream& stream) {
    thread_local std::vector<float> keys;
    if (static_cast<int64_t>(keys.size()) < bands * kPackedKeysN * masked_k) {
      keys.resize(bands * kPackedKeysN * masked_k);
    }
    PackKeysBlocked(rhs + b * weights_step, masked_n, masked_k, keys.data());
    for (size_t i = 0; i < masked_blocks.size(); ++i) {
      const MaskedBlock& block = masked_blocks[i];
      std::unordered_map<int, dnnl::memory>& args = KeptArguments(&name, static_cast<int64_t>(i));
      const Part& part = BindMaskedBlock(frame, b, block, keys.data() + block.column * masked_k, args);
      thread_local std::vector<char> scratchpad;
      if (scratchpad.size() < part.scratchpad.get_size()) scratchpad.resize(part.scratchpad.get_size());
      BindArgument(args, DNNL_ARG_SCRATCHPAD, part.scratchpad, scratchpad.data());
      part.primitive.execute(stream, args);
      stream.wait();
      PlaceMaskedBlock(frame, b, block);
    }
  });
}

Status OneDnnThunk::Impl::RunPerBatchElement(
    ExecuteContext& context, const std::string& name,
    const std::function<void(int64_t b, dnnl::stream& stream)>& element) const {
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  auto run = [&](int64_t begin, int64_t end) {
    SingleOpenMpThread single_openmp_thread;
    for (int64_t b = begin; b < end; ++b) {
      std::optional<profiler::TraceSpan> span;
      if (profiler::TracingEnabled()) {
        span.emplace(fmt::format("{} part {}", name, b), profiler::category::kLibraryPart);
        span->AddArg("part", b);
      }
      try {
        element(b, ThreadStream());
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(failure_mu);
        failed = true;
        failure = e.what();
      }
    }
  };
  if (context.pool == nullptr || batch == 1) {
    run(0, batch);
  } else {
    context.pool->ParallelFor(batch, 1, run);
  }
  if (failed) return Error(fmt::format("{}: oneDNN: {}", name, failure));
  return OkStatus();
}

bool OneDnnThunk::Impl::ExecuteNarrow(char** frame, ExecuteContext& context, std::atomic<int64_t>& whole_runs,
                                      const std::string& name) const {
  const SmallProductShape& s = small_shape;
  const float* lhs = Lhs(frame);
  const float* rhs = Rhs(frame);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  // The loops write the output before the post-ops read the addends: an output in an operand's
  // buffer (a residual added in place) takes oneDNN's parts.
  if (frame[lhs_slot] == frame[output_slot] || frame[rhs_slot] == frame[output_slot]) return false;
  for (int64_t slot : addend_slots) {
    if (frame[slot] == frame[output_slot]) return false;
  }
  // `part`: its number in the trace, as oneDNN's parts are numbered (the whole call, run on the
  // caller, after them), so that a trace shows which thread ran each part and when it started.
  auto trace_part = [&](std::optional<profiler::TraceSpan>& span, int64_t part) {
    if (!profiler::TracingEnabled()) return;
    span.emplace(fmt::format("{} part {}", name, part), profiler::category::kLibraryPart);
    span->AddArg("part", part);
  };
  // The rhs's rows [first, first + count) packed as their transpose (PackNarrowRhs), its rows
  // NarrowPackedStride(count) apart from a line's start, into a buffer of the calling thread's,
  // reused from call to call.
  auto packed_rhs = [&](int64_t first, int64_t count) -> const float* {
    thread_local std::vector<float> packed;
    float* aligned = AlignedFloats(packed, NarrowPackedStride(count) * s.n, kNarrowPackedAlignment);
    PackNarrowRhs(rhs + first * s.n, count, s.n, aligned, NarrowPackedStride(count));
    return aligned;
  };
  auto rows = [&](int64_t first, int64_t count, int64_t part) {
    std::optional<profiler::TraceSpan> span;
    trace_part(span, part);
    if (short_k) {  // columns [first, first + count)
      ShortKProduct(s.m, s.k, count, lhs, rhs + first * s.k, output + first, s.n);
      return;
    }
    float* out = output + first * s.n;
    const std::vector<const float*>& addends = AddendsFromRow(frame, first, s.n);
    if (s.lhs_transposed) {
      // The lhs stored [k, m]: this part's rows are its columns from `first`. A weight update
      // (w - lr x^T g) is applied in the loops' store, where the rows are in registers: as a pass
      // after them it read the output and w again (the convolution step's f32[3136,10], 1-1.5 us
      // of a part's 10).
      NarrowOutputUpdate update;
      if (NarrowOutputUpdateOf(post_ops, addends, &update)) {
        NarrowProductTransposedLhs(count, s.k, s.n, lhs + first, s.m, rhs, out, update);
        return;
      }
      NarrowProductTransposedLhs(count, s.k, s.n, lhs + first, s.m, rhs, out);
    } else {
      const float* rhs_transposed = s.rhs_transposed ? rhs : packed_rhs(0, s.k);
      NarrowProduct(count, s.k, s.n, lhs + first * s.k, s.k, rhs_transposed,
                    s.rhs_transposed ? s.k : NarrowPackedStride(s.k), out);
    }
    ApplySmallProductPostOps(post_ops, addends, count, s.n, out);
  };
  const int64_t parts = narrow_parts;
  if (parts == 1 || context.pool == nullptr || context.pool->RunsInline(parts, 1)) {
    if (parts > 1) whole_runs.fetch_add(1, std::memory_order_relaxed);
    rows(0, short_k ? s.n : s.m, parts > 1 ? parts : 0);
  } else if (narrow_split_k) {
    // The caller's: the parts write into it from other threads, and it stays mapped from one
    // call to the next.
    thread_local std::vector<float> partials;
    const size_t size = static_cast<size_t>((parts - 1) * s.m * s.n);
    if (partials.size() < size) partials.resize(size);
    float* partial = partials.data();
    context.pool->ParallelFor(parts, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        std::optional<profiler::TraceSpan> span;
        trace_part(span, t);
        const int64_t first = t * narrow_block, count = std::min(narrow_block, s.k - first);
        NarrowProduct(s.m, count, s.n, lhs + first, s.k, packed_rhs(first, count), NarrowPackedStride(count),
                      t == 0 ? output : partial + (t - 1) * s.m * s.n);
      }
    });
    // m x n sums (the convolution step's 320) on the caller: a loop over the pool would cost more
    // than it adds.
    for (int64_t p = 0; p + 1 < parts; ++p) AddTo(output, partial + p * s.m * s.n, s.m * s.n);
    ApplySmallProductPostOps(post_ops, AddendsFromRow(frame, 0, s.n), s.m, s.n, output);
  } else {
    context.pool->ParallelFor(parts, 1, [&](int64_t begin, int64_t end) {
      const int64_t extent = short_k ? s.n : s.m;
      for (int64_t t = begin; t < end; ++t) rows(t * narrow_block, std::min(narrow_block, extent - t * narrow_block), t);
    });
  }
  return true;
}

Status OneDnnThunk::Execute(char** frame, ExecuteContext& context) const {
  const Impl& impl = *impl_;
  if (impl.is_convolution) return impl.ExecuteConvolution(frame, context, hlo_name());
  if (impl.masked_packed_keys) return impl.ExecuteMaskedPackedKeys(frame, context, hlo_name());
  if (!impl.masked_blocks.empty()) return impl.ExecuteMasked(frame, context, hlo_name());
  if (!impl.contraction_blocks.empty()) return impl.ExecuteMaskedContraction(frame, context, hlo_name());
  if (impl.small) {
    const SmallProductShape& s = impl.small_shape;
    float* output = reinterpret_cast<float*>(frame[impl.output_slot]);
    const int64_t size = s.batch * s.m * s.n;
    // An output that shares its buffer with an operand (a residual added in place) is computed
    // aside first: the loops write outputs before the post-ops read the addends.
    std::vector<const float*> addends;
    for (int64_t slot : impl.addend_slots) addends.push_back(reinterpret_cast<const float*>(frame[slot]));
    bool shared = frame[impl.lhs_slot] == frame[impl.output_slot] || frame[impl.rhs_slot] == frame[impl.output_slot];
    for (const float* a : addends) shared |= a == output;
    thread_local std::vector<float> aside;
    float* result = output;
    if (shared) {
      if (static_cast<int64_t>(aside.size()) < size) aside.resize(size);
      result = aside.data();
    }
    SmallProduct(s, impl.Lhs(frame), impl.Rhs(frame), result);
    ApplySmallProductPostOps(impl.post_ops, addends, s.batch * s.m, s.n, result);
    if (shared) std::memcpy(output, result, size * sizeof(float));
    return OkStatus();
  }
  const int64_t tasks = impl.batch * impl.blocks;
  if (impl.narrow && impl.ExecuteNarrow(frame, context, whole_runs_, hlo_name())) return OkStatus();
  if (impl.split_k) return impl.ExecuteSplitK(frame, runs_inline_ ? nullptr : context.pool, context, hlo_name());
  float* lhs = impl.Lhs(frame);
  float* rhs = impl.Rhs(frame);
  float* output = reinterpret_cast<float*>(frame[impl.output_slot]);
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args,
                       dnnl::stream&) -> const Impl::Part& {
    int64_t src_offset, weights_offset = 0, dst_offset, count, bias_offset = 0;
    if (t == tasks) {  // the whole product (Impl::whole)
      count = impl.total;
      src_offset = dst_offset = 0;
    } else {
      const int64_t b = t / impl.blocks, first = (t % impl.blocks) * impl.block;
      count = std::min(impl.block, impl.total - first);
      const int64_t r0 = impl.split_rows ? first : 0, c0 = impl.split_rows ? 0 : first;
      src_offset = b * impl.src_step + r0 * impl.src_row_step;
      weights_offset = b * impl.weights_step + c0 * impl.weights_column_step;
      dst_offset = b * impl.dst_step + r0 * impl.dst_row_step + c0;
      bias_offset = c0;
    }
    const Impl::Part& part = impl.parts.at(count);
    if (part.pack_src) {
      // The block's rows are the lhs's columns: [k, count] at the block's first, read as their
      // transpose [count, k].
      thread_local std::vector<float> packed;
      const int64_t k = part.src.dims()[1];
      if (static_cast<int64_t>(packed.size()) < count * k) packed.resize(count * k);
      TransposedCopy(lhs + src_offset, k, count, part.pack_lda, packed.data(), k);
      BindArgument(args, DNNL_ARG_SRC, part.src, packed.data());
    } else {
      BindArgument(args, DNNL_ARG_SRC, part.src, lhs + src_offset);
    }
    BindArgument(args, DNNL_ARG_WEIGHTS, part.weights, rhs + weights_offset);
    BindArgument(args, DNNL_ARG_DST, part.dst, output + dst_offset);
    if (impl.sum_addends) {
      impl.SumAddendsInto(frame, part, output, dst_offset, bias_offset);
      return part;
    }
    for (size_t a = 0; a < impl.own_addends_from; ++a) {
      float* addend = reinterpret_cast<float*>(frame[impl.addend_slots[a]]);
      if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += dst_offset;
      if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kLastDimension) addend += bias_offset;
      BindArgument(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(impl.addend_post_ops[a]) | DNNL_ARG_SRC_1,
                   part.addends[a], addend);
    }
    return part;
  };
  // The ReLU and what follows it on the block the part wrote, still in its core's cache.
  auto own_post_ops = [&](int64_t t) {
    if (impl.own_post_ops.empty()) return;
    int64_t dst_offset = 0, column = 0, count = impl.total;
    if (t != tasks) {
      const int64_t b = t / impl.blocks, first = (t % impl.blocks) * impl.block;
      count = std::min(impl.block, impl.total - first);
      column = impl.split_rows ? 0 : first;
      dst_offset = b * impl.dst_step + (impl.split_rows ? first * impl.dst_row_step : first);
    }
    const dims d = impl.parts.at(count).dst.dims();
    impl.ApplyOwnPostOps(frame, output + dst_offset, d[0], d[1], impl.dst_row_step, dst_offset, column);
  };
  if (impl.whole && (context.pool == nullptr || context.pool->RunsInline(tasks, 1))) {
    // One call on this thread rather than the parts one after the other; numbered after them.
    whole_runs_.fetch_add(1, std::memory_order_relaxed);
    return ExecutePartsOnPool(nullptr, 1, hlo_name(), bind_part, own_post_ops, /*first=*/tasks);
  }
  return ExecutePartsOnPool(runs_inline_ ? nullptr : context.pool, tasks, hlo_name(), bind_part, own_post_ops);
}

int64_t OneDnnThunk::Parts() const {
  if (impl_->small) return 1;
  if (impl_->narrow) return impl_->narrow_parts;
  if (impl_->masked_packed_keys || !impl_->contraction_blocks.empty()) return impl_->batch;
  if (!impl_->bands.empty()) return static_cast<int64_t>(impl_->bands.size());
  return impl_->is_convolution ? impl_->blocks : impl_->batch * impl_->blocks;
}

double OneDnnThunk::ComputedShare() const {
  if (!impl_->contraction_blocks.empty()) return impl_->contraction_share;
  return impl_->masked_blocks.empty() ? 1 : impl_->masked_share;
}

bool OneDnnThunk::ReordersWeights() const { return impl_->reorder_weights; }

int64_t OneDnnThunk::ColumnBlockWeightsSlot() const {
  const Impl& impl = *impl_;
  if (impl.is_convolution || impl.small || impl.narrow || impl.split_rows || impl.split_k || impl.parts.empty() ||
      !impl.masked_blocks.empty()) {
    return -1;
  }
  // Few rows (64 at most: the LSTM step's batch) make reading the weights most of a part's work;
  // the GELU MLP's 256x512x2048, 256 rows, lost on 4 KiB pages (its column parts' best 1.65-1.73
  // ms against 1.49-1.58 on 2 MiB pages, 8 processes alternating, load 4-5).
  if (impl.parts.at(impl.block).src.dims()[0] > 64) return -1;
  const dnnl::memory::desc& weights = impl.parts.at(impl.block).weights;
  const dims d = weights.dims();
  if (d.size() != 2 || weights.data.format_kind != dnnl_blocked) return -1;
  const dnnl_dim_t* strides = weights.data.format_desc.blocking.strides;
  if (strides[1] != 1 || d[1] >= strides[0]) return -1;  // dense, or a transposed rhs
  return (strides[0] * static_cast<int64_t>(sizeof(float))) % 4096 == 0 ? impl.rhs_slot : -1;
}

bool OneDnnThunk::ComputeRunsInline() const {
  const Impl& impl = *impl_;
  if (impl.small || impl.is_convolution || impl.parts.empty() || impl.batch * impl.blocks == 1) return false;
  // The block (the other size is the remainder) bounds them all.
  const Impl::Part& part = impl.parts.at(impl.block);
  const dims src = part.src.dims(), weights = part.weights.dims();
  const int64_t multiply_adds = impl.batch * impl.blocks * src[0] * src[1] * weights[1];
  return multiply_adds < (int64_t{2} << 18);
}

std::string OneDnnThunk::ToString(int indent) const {
  return fmt::format("{:{}}library-call {} (oneDNN {}; kernel {}; {} part{} on the {})\n", "",
                     indent, hlo_name(), description_, implementation_,
                     Parts(), Parts() == 1 ? "" : "s", runs_inline_ ? "calling thread" : "pool");
}

#endif

}  // namespace xlens::runtime
