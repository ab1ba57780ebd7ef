#include "compiler/passes/onednn_rewriter.h"

#include "compiler/passes/onednn_activation_matcher.h"
#include "compiler/support/cpu_features.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace xlens {
namespace {

using Positions = std::unordered_map<const HloInstruction*, int64_t>;

bool IsRowMajorF32(const Shape& s) {
  return s.IsArray() && s.element_type() == PrimitiveType::F32 && s.is_static() &&
         (!s.has_layout() || s.layout().minor_to_major == shape_util::DefaultMinorToMajor(s.rank()));
}

// A rank-0 constant, or a broadcast of one; its value.
bool ScalarConstant(const HloInstruction* i, double* value) {
  if (i->opcode() == HloOpcode::kBroadcast && i->operand_count() == 1) i = i->operand(0);
  if (i->opcode() != HloOpcode::kConstant || !i->has_literal() || !i->shape().IsArray() ||
      i->shape().rank() != 0 || i->literal().is_elided() || i->literal().is_text_only()) {
    return false;
  }
  *value = i->literal().GetAsDouble(0);
  return true;
}

// One step of the chain on top of the product: the instructions it absorbs and where the value
// continues.
struct ChainStep {
  std::vector<OneDnnPostOp> ops;  // one, or the three a subtraction takes
  std::vector<HloInstruction*> members;  // including scalar constants and broadcasts
  HloInstruction* addend = nullptr;      // kAdd: the tensor added (outside the members)
  HloInstruction* result = nullptr;
};

// `v` + bias (broadcast along the minor dimension), + a tensor of its shape, or + a broadcast
// scalar that is not a constant (constants are the affine map's); `v` - such a tensor, or such a
// tensor - `v` (a gradient step's w - lr * g). oneDNN adds: `other` - `v` is -v + other, and
// `v` - `other` is -(-v + other), each exact in IEEE arithmetic (negation is exact and a + (-b)
// is a - b), so the result is bit for bit the subtraction's up to the sign of a zero.
std::optional<ChainStep> FindAdd(HloInstruction* v) {
  if (UseCount(*v) != 1 || v->users().size() != 1) return std::nullopt;
  HloInstruction* u = v->users()[0];
  if ((u->opcode() != HloOpcode::kAdd && u->opcode() != HloOpcode::kSubtract) ||
      u->operand(0) == u->operand(1) || !IsRowMajorF32(u->shape())) {
    return std::nullopt;
  }
  HloInstruction* other = u->operand(0) == v ? u->operand(1) : u->operand(0);
  double ignored;
  if (ScalarConstant(other, &ignored)) return std::nullopt;
  ChainStep step;
  OneDnnPostOp add;
  add.kind = OneDnnPostOp::Kind::kAdd;
  step.result = u;
  step.members = {u};
  auto finish = [&](OneDnnPostOp::Addend kind, HloInstruction* addend) {
    add.addend = kind;
    step.addend = addend;
    if (u->opcode() == HloOpcode::kAdd) {
      step.ops = {add};
      return step;
    }
    OneDnnPostOp negate;
    negate.kind = OneDnnPostOp::Kind::kLinear;
    negate.alpha = -1;
    step.ops = {negate, add};
    if (u->operand(0) == v) step.ops.push_back(negate);
    return step;
  };
  if (other->opcode() != HloOpcode::kBroadcast) {
    if (!IsRowMajorF32(other->shape()) || other->shape().dimensions() != v->shape().dimensions()) {
      return std::nullopt;
    }
    return finish(OneDnnPostOp::Addend::kFull, other);
  }
  // The broadcast operand's elements are contiguous either way: one, or n along a dimension
  // that lands on the minor one (a [n] bias, or JAX's [1, n] reshape of it).
  HloInstruction* x = other->operand(0);
  const int64_t rank = v->shape().rank();
  if (!IsRowMajorF32(x->shape())) return std::nullopt;
  int64_t spread = -1;
  for (int64_t d = 0; d < x->shape().rank(); ++d) {
    if (x->shape().dimensions(d) == 1) continue;
    if (spread >= 0) return std::nullopt;
    spread = d;
  }
  step.members.push_back(other);
  if (spread < 0) return finish(OneDnnPostOp::Addend::kScalar, x);
  if (other->dimensions(spread) == rank - 1 &&
      x->shape().dimensions(spread) == v->shape().dimensions(rank - 1)) {
    return finish(OneDnnPostOp::Addend::kLastDimension, x);
  }
  return std::nullopt;
}

// The activation on top of `v`, recognised by its structure (onednn_activation_matcher.h).
std::optional<ChainStep> FindActivation(HloInstruction* v, const Positions& positions) {
  std::optional<ActivationMatch> match = MatchOneDnnActivation(v);
  if (!match) return std::nullopt;
  ChainStep step;
  step.ops = {match->op};
  step.result = match->root;
  step.members = std::move(match->members);
  // In the computation's order, so that fusions and decisions come out the same every time.
  std::sort(step.members.begin(), step.members.end(), [&](const HloInstruction* a, const HloInstruction* b) {
    return positions.at(a) < positions.at(b);
  });
  step.members.erase(std::unique(step.members.begin(), step.members.end()), step.members.end());
  return step;
}

// A tanh GELU over a product's result of at least this many elements is left to the compiler's
// own loop after the call where the thunk cannot apply it itself (a CPU without AVX-512:
// OneDnnPostOpAppliedByThunk). oneDNN 2.6 computes it at some 1.3-1.6 G elements/s a core (in
// the pass after gemm:jit's column parts, or in brgemm's registers; one core, [256,512] x
// [512,2048]: 5.2 ms for the product alone, 5.6 with the GELU) against about 4 for the inline
// tanh of fast_math.h, which more than pays for a pass over a result still in cache: the GELU
// MLP's first call 2.89 ms with it, 2.56 + 0.11 ms for the call and the loop after it (quartiles
// of 60 runs beside other work). A smaller result keeps it in the call, where a kernel of its
// own would cost more to start than the GELU does.
constexpr int64_t kOwnLoopGeluElements = int64_t{1} << 17;

bool LeftToOwnLoop(const HloInstruction& core, const ChainStep& step) {
  return core.opcode() == HloOpcode::kDot && step.ops.size() == 1 &&
         step.ops.front().kind == OneDnnPostOp::Kind::kGeluTanh && !OneDnnPostOpAppliedByThunk(step.ops.front()) &&
         core.shape().num_elements() >= kOwnLoopGeluElements;
}

bool IsNegation(const OneDnnPostOp& op) {
  return op.kind == OneDnnPostOp::Kind::kLinear && op.alpha == -1 && op.beta == 0;
}

// The post-ops on top of `core`, greedily, and where the value ends. oneDNN (2.6) applies every
// eltwise_linear of one call with the first one's parameters (measured: linear(0.1x), add,
// linear(-x) computed 0.1 * (0.1 d + r)), so a chain holds linear post-ops of one (alpha, beta)
// only and ends before a step that would bring another. A subtraction's leading negation right
// after a linear map is folded into it: -(a x + b) is (-a) x + (-b), exactly.
std::vector<ChainStep> FindChain(HloInstruction* core, HloInstruction** end) {
  HloComputation* computation = core->parent();
  std::vector<HloInstruction*> order = computation->MakeInstructionPostOrder();
  Positions positions;
  for (size_t i = 0; i < order.size(); ++i) positions[order[i]] = static_cast<int64_t>(i);
  std::vector<ChainStep> chain;
  HloInstruction* v = core;
  bool after_relu = false;
  while (true) {
    std::optional<ChainStep> step = FindAdd(v);
    if (!step) step = FindActivation(v, positions);
    if (!step || LeftToOwnLoop(*core, *step)) break;
    // The thunk applies the post-ops from the first ReLU on itself, after oneDNN has written the
    // product (onednn_thunks.cc: own_post_ops), when an addend of the output's shape may already
    // be overwritten (a residual sharing the output's buffer): such an add ends the chain there.
    if (after_relu && std::any_of(step->ops.begin(), step->ops.end(), [](const OneDnnPostOp& op) {
          return op.kind == OneDnnPostOp::Kind::kAdd && op.addend == OneDnnPostOp::Addend::kFull;
        })) {
      break;
    }
    OneDnnPostOp* last = chain.empty() ? nullptr : &chain.back().ops.back();
    const bool fold = step->ops.size() > 1 && IsNegation(step->ops.front()) && last != nullptr &&
                      last->kind == OneDnnPostOp::Kind::kLinear;
    // The linear maps the chain would hold with this step.
    std::vector<std::pair<double, double>> maps;
    for (const ChainStep& c : chain) {
      for (const OneDnnPostOp& op : c.ops) {
        if (op.kind != OneDnnPostOp::Kind::kLinear) continue;
        maps.push_back(fold && &op == last ? std::pair(-op.alpha, -op.beta) : std::pair(op.alpha, op.beta));
      }
    }
    for (size_t i = fold ? 1 : 0; i < step->ops.size(); ++i) {
      if (step->ops[i].kind == OneDnnPostOp::Kind::kLinear) maps.push_back({step->ops[i].alpha, step->ops[i].beta});
    }
    if (std::any_of(maps.begin(), maps.end(), [&](const auto& m) { return m != maps.front(); })) break;
    if (fold) {
      last->alpha = -last->alpha;
      last->beta = -last->beta;
      step->ops.erase(step->ops.begin());
    }
    for (const OneDnnPostOp& op : step->ops) {
      after_relu |= OneDnnPostOpAppliedByThunk(op);
    }
    v = step->result;
    chain.push_back(std::move(*step));
  }
  *end = v;
  return chain;
}

// A transpose swapping the two minor dimensions of a row-major f32 array: read in place.
bool IsMinorTranspose(const HloInstruction& i) {
  if (i.opcode() != HloOpcode::kTranspose || !IsRowMajorF32(i.operand(0)->shape())) return false;
  const std::vector<int64_t>& p = i.dimensions();
  const int64_t rank = static_cast<int64_t>(p.size());
  if (rank < 2) return false;
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (p[d] != d) return false;
  }
  return p[rank - 2] == rank - 1 && p[rank - 1] == rank - 2;
}

// A slice of a row-major f32 array whose elements lie together in it, in order: every dimension
// minor to the most minor one it cuts taken whole, every one major to that of one element (a
// batch element of attention's q, k or v, [1, 1024, 64] of [8, 1024, 64]). The offset of its
// first element, or -1.
int64_t ContiguousSliceOffset(const HloInstruction& i) {
  if (i.opcode() != HloOpcode::kSlice || !i.has_slice || !IsRowMajorF32(i.operand(0)->shape()) ||
      !IsRowMajorF32(i.shape())) {
    return -1;
  }
  const Shape& from = i.operand(0)->shape();
  const int64_t rank = from.rank();
  if (static_cast<int64_t>(i.slice_starts.size()) != rank || static_cast<int64_t>(i.slice_limits.size()) != rank) {
    return -1;
  }
  int64_t offset = 0, stride = 1;
  bool cut = false;  // a dimension minor to this one is not taken whole
  for (int64_t d = rank - 1; d >= 0; --d) {
    const int64_t extent = i.shape().dimensions(d);
    const int64_t step = d < static_cast<int64_t>(i.slice_strides.size()) ? i.slice_strides[d] : 1;
    if ((step != 1 && extent > 1) || (cut && extent > 1)) return -1;
    cut |= extent != from.dimensions(d);
    offset += i.slice_starts[d] * stride;
    stride *= from.dimensions(d);
  }
  return offset;
}

// A reshape or bitcast from one row-major f32 array to another leaves every element where it
// was (a reshape is defined on the row-major order), so a product reads what is under it in
// place: JAX takes an attention head as reshape(slice(q)), f32[1,1024,64] -> [1024,64], and
// flattens a batch for a layer as x.reshape(-1, d) @ w. Under any other layout a reshape moves
// elements and stays a copy.
bool IsRowMajorBitcast(const HloInstruction& i) {
  return (i.opcode() == HloOpcode::kReshape || i.opcode() == HloOpcode::kBitcast) && i.operand_count() == 1 &&
         IsRowMajorF32(i.shape()) && IsRowMajorF32(i.operand(0)->shape());
}

// The views a convolution's operands are read through and how oneDNN computes it: the operands
// read through their transposes (and the kernel through a reverse) when that is what oneDNN can
// take, else as they are. False with the reason in `why` when no way works.
bool ConvolutionViews(const HloInstruction& core, OneDnnOperandView* lhs, OneDnnOperandView* rhs,
                      OneDnnConvolution* convolution, std::string* why) {
  const OneDnnOperandView lhs_views[] = {ViewThrough(*core.operand(0), false), DirectView(*core.operand(0))};
  const OneDnnOperandView rhs_views[] = {ViewThrough(*core.operand(1), true), DirectView(*core.operand(1))};
  std::string first_why;
  for (const OneDnnOperandView& l : lhs_views) {
    for (const OneDnnOperandView& r : rhs_views) {
      std::string reason;
      if (std::optional<OneDnnConvolution> c = DescribeOneDnnConvolution(core, l, r, &reason)) {
        if (lhs != nullptr) *lhs = l;
        if (rhs != nullptr) *rhs = r;
        *convolution = *c;
        why->clear();
        return true;
      }
      if (first_why.empty()) first_why = reason;
    }
  }
  *why = first_why;
  return false;
}

std::string ConvolutionRefusalReason(const HloInstruction& core) {
  std::string why;
  OneDnnConvolution ignored;
  ConvolutionViews(core, nullptr, nullptr, &ignored, &why);
  return why;
}

// Why oneDNN cannot take `core` (empty when it can).
std::string RefusalReason(const HloInstruction& core) {
  const Shape& lhs = core.operand(0)->shape();
  const Shape& rhs = core.operand(1)->shape();
  if (core.opcode() == HloOpcode::kConvolution) return ConvolutionRefusalReason(core);
  if (!IsRowMajorF32(lhs) || !IsRowMajorF32(rhs) || !IsRowMajorF32(core.shape())) {
    return "oneDNN calls take f32 row-major arrays only";
  }
  if (core.opcode() == HloOpcode::kDot) {
    if (!core.dot_dimension_numbers) return "no dimension numbers";
    const DotDimensionNumbers& dn = *core.dot_dimension_numbers;
    const int64_t nb = static_cast<int64_t>(dn.lhs_batch_dimensions.size());
    for (int64_t i = 0; i < nb; ++i) {
      if (dn.lhs_batch_dimensions[i] != i || dn.rhs_batch_dimensions[i] != i) {
        return "not in dot-decomposer's canonical form";
      }
    }
    if (lhs.rank() != nb + 2 || rhs.rank() != nb + 2 ||
        dn.lhs_contracting_dimensions != std::vector<int64_t>{nb + 1} ||
        dn.rhs_contracting_dimensions != std::vector<int64_t>{nb}) {
      return "not a (batched) matrix-matrix product in canonical form";
    }
    return "";
  }
  return "";
}

// Whether this CPU runs those loops (AVX-512F, as NarrowProductAvailable says): elsewhere oneDNN
// computes a narrow product, at a fraction of its kernels' speed. The host's answer is the
// target's: the JIT compiles for the machine it runs on, and `xlens aot`, which compiles for
// others, runs the passes without this one (aot_compiler.cc), its products and convolutions
// generated loops for the target's own features (a 256x128x10 weight gradient compiled for
// haswell on an AVX-512 host: no zmm register in the object, no undefined symbol).
bool NarrowLoopsAvailable() { return CpuHasAvx512F(); }

// A minor transpose of a product's result, with at most an elementwise chain by scalar constants
// between them (a gradient's transpose(dot(g^T, x)) * lr, as JAX differentiates x @ w), is the
// product of the transposed operands in swapped order: (a b)^T = b^T a^T. Computing that
// product gives the transposed result directly (row-major, as the call writes it), its operands
// read in place through strides, instead of a call followed by a transposing loop; the chain
// stays on top of the product for the post-ops. `what` gets "transpose.5 of dot.2" per rewrite.
StatusOr<bool> SinkTransposesIntoProducts(HloComputation& computation,
                                          std::vector<std::pair<std::string, std::string>>* what) {
  // An elementwise f32 instruction of `v`'s shape whose other operands are broadcast scalars.
  auto commutes = [](const HloInstruction* u, const HloInstruction* v) {
    if (!u->IsElementwise() || !IsRowMajorF32(u->shape()) ||
        u->shape().dimensions() != v->shape().dimensions()) {
      return false;
    }
    for (const HloInstruction* o : u->operands()) {
      if (o == v) continue;
      if (o->opcode() != HloOpcode::kBroadcast || o->operand_count() != 1 || !o->dimensions().empty() ||
          o->operand(0)->shape().rank() != 0) {
        return false;
      }
    }
    return std::count(u->operands().begin(), u->operands().end(), v) == 1;
  };
  bool changed = false;
  for (HloInstruction* t : computation.MakeInstructionPostOrder()) {
    if (!IsMinorTranspose(*t) || !IsRowMajorF32(t->shape())) continue;
    // Down from the transpose to the product, every value read only by the next.
    std::vector<HloInstruction*> chain;  // from the product's user up to the transpose's operand
    HloInstruction* v = t->operand(0);
    while (v->opcode() != HloOpcode::kDot && UseCount(*v) == 1) {
      HloInstruction* below = nullptr;
      for (HloInstruction* o : v->operands()) {
        if (commutes(v, o)) below = o;
      }
      if (below == nullptr) break;
      chain.push_back(v);
      v = below;
    }
    HloInstruction* dot = v;
    if (dot->opcode() != HloOpcode::kDot || UseCount(*dot) != 1 || !RefusalReason(*dot).empty()) continue;
    // Not where the swap would make the product's rows shorter than a vector block of oneDNN's
    // kernels (64 columns) from longer ones: a narrow result transposes cheaply after the call,
    // and a product that narrow runs at a fraction of the kernel's speed (the MLP step's
    // [256,10] bias-layer gradient: 4x slower as a 256x128x10 product than as 10x128x256).
    const int64_t before = dot->shape().dimensions().back(), after = t->shape().dimensions().back();
    const Shape& a_shape = dot->operand(0)->shape();
    const int64_t m = a_shape.dimensions(a_shape.rank() - 2), k = a_shape.dimensions(a_shape.rank() - 1);
    // Except where the swapped product is one that the CPU runtime's loops for narrow results
    // take (onednn_thunks.cc: at most kNarrowOutputColumns columns, a k of
    // kNarrowTransposedLhsMinK or more, no batch) with its lhs read transposed in place and its
    // rhs stored [k, n]: a weight gradient transpose(g^T x) = x^T g
    // (NarrowProductTransposedLhs), the update's scaling and subtraction its post-ops, with no
    // transposing loop after it. The MNIST step's w - 0.5 transpose(g^T x), x [100,784] and g
    // [100,10], on one core 0.016 ms a run either way (both products at the FMA peak); on two
    // threads, best of 5000, 0.014 -> 0.009 ms. The MLP step's [256,10] gradient above is such a
    // product too: the step's best of 300 runs in 4 alternating pairs 0.660-0.671 -> 0.665-0.680
    // ms, its time in its large products. So is the convolution step's [3136,10] gradient from x
    // [32,3136] (k = 32): that call and its transposing subtraction took 21.2-21.7 us a run at
    // best (medians 34-46), the loops 13.6-13.8 (medians 27-28), best of 300 runs of the step in
    // 3 alternating rounds.
    const bool narrow = NarrowLoopsAvailable() && dot->shape().rank() == 2 && after <= kNarrowOutputColumns &&
                        k >= kNarrowTransposedLhsMinK && IsMinorTranspose(*dot->operand(0)) && !IsMinorTranspose(*dot->operand(1));
    if (!narrow && after < std::min<int64_t>(before, 64)) continue;
    // Nor where b^T would be a new transposed lhs larger than the result: the call packs a
    // transposed lhs block by block, which then costs more than transposing the result after it.
    if (!narrow && !IsMinorTranspose(*dot->operand(1)) && k > m) continue;
    std::reverse(chain.begin(), chain.end());
    // b^T and a^T: a transpose of a transpose is its operand.
    auto transposed = [&](HloInstruction* o) -> HloInstruction* {
      if (IsMinorTranspose(*o)) return o->operand(0);
      std::vector<int64_t> dims = o->shape().dimensions();
      std::swap(dims[dims.size() - 2], dims[dims.size() - 1]);
      Shape shape(PrimitiveType::F32, dims);
      shape.SetDefaultLayout();
      return computation.AddInstruction(t->CloneWithNewOperands(shape, {o}));
    };
    HloInstruction* lhs = transposed(dot->operand(1));
    HloInstruction* rhs = transposed(dot->operand(0));
    HloInstruction* value = computation.AddInstruction(dot->CloneWithNewOperands(t->shape(), {lhs, rhs}));
    for (HloInstruction* c : chain) {
      std::vector<HloInstruction*> operands;
      for (HloInstruction* o : c->operands()) {
        if (o->opcode() == HloOpcode::kBroadcast && o->shape().dimensions() == c->shape().dimensions() &&
            std::count(chain.begin(), chain.end(), o) == 0 && o != dot) {
          operands.push_back(computation.AddInstruction(o->CloneWithNewOperands(t->shape(), {o->operand(0)})));
        } else {
          operands.push_back(value);
        }
      }
      value = computation.AddInstruction(c->CloneWithNewOperands(t->shape(), operands));
    }
    what->push_back({t->name(), dot->name()});
    RETURN_IF_ERROR(computation.ReplaceInstruction(t, value));
    changed = true;
  }
  return changed;
}

}  // namespace


std::string OneDnnPostOpName(const OneDnnPostOp& op) {
  switch (op.kind) {
    case OneDnnPostOp::Kind::kAdd:
      return op.addend == OneDnnPostOp::Addend::kFull          ? "binary_add"
             : op.addend == OneDnnPostOp::Addend::kLastDimension ? "binary_add[bias]"
                                                                 : "binary_add[scalar]";
    case OneDnnPostOp::Kind::kRelu: return "relu";
    case OneDnnPostOp::Kind::kRelu6: return "relu6";
    case OneDnnPostOp::Kind::kGeluTanh: return "gelu_tanh";
    case OneDnnPostOp::Kind::kGeluErf: return "gelu_erf";
    case OneDnnPostOp::Kind::kLogistic: return "logistic";
    case OneDnnPostOp::Kind::kLinear: return fmt::format("linear({:g}x{:+g})", op.alpha, op.beta);
  }
  return "";
}

bool OneDnnPostOpAppliedByThunk(const OneDnnPostOp& op) {
  return op.kind == OneDnnPostOp::Kind::kRelu || op.kind == OneDnnPostOp::Kind::kRelu6 ||
         (op.kind == OneDnnPostOp::Kind::kGeluTanh && CpuHasAvx512F());
}

std::string OneDnnCall::ToString() const {
  std::string s = is_convolution ? convolution.ToString() : fmt::format("matmul({}{}, {}{})", "lhs",
                                                               lhs_transposed ? "^T" : "", "rhs",
                                                               rhs_transposed ? "^T" : "");
  for (const OneDnnPostOp& op : post_ops) s += " + " + OneDnnPostOpName(op);
  return s;
}

std::optional<OneDnnCall> MatchOneDnnCall(const HloInstruction& fusion) {
  if (fusion.opcode() != HloOpcode::kFusion || fusion.fusion_kind != FusionKind::kCustom ||
      fusion.fused_computation() == nullptr) {
    return std::nullopt;
  }
  const HloComputation& computation = *fusion.fused_computation();
  HloInstruction* core = nullptr;
  for (HloInstruction* i : computation.instructions()) {
    if (i->opcode() != HloOpcode::kDot && i->opcode() != HloOpcode::kConvolution) continue;
    if (core != nullptr) return std::nullopt;
    core = i;
  }
  if (core == nullptr || !RefusalReason(*core).empty()) return std::nullopt;
  OneDnnCall call;
  call.core = core;
  call.is_convolution = core->opcode() == HloOpcode::kConvolution;
  auto operand = [&](const HloInstruction* o, int64_t* parameter, bool* transposed, int64_t* offset) {
    if (!call.is_convolution && IsMinorTranspose(*o)) {
      *transposed = true;
      o = o->operand(0);
    }
    while (IsRowMajorBitcast(*o)) o = o->operand(0);
    if (const int64_t at = ContiguousSliceOffset(*o); at >= 0) {
      *offset = at;
      o = o->operand(0);
    }
    if (o->opcode() != HloOpcode::kParameter) return false;
    *parameter = o->parameter_number();
    return true;
  };
  if (call.is_convolution) {
    // The transposes and reverse the rewriter absorbed are exactly what lies between the
    // convolution and the fusion's parameters.
    OneDnnOperandView lhs, rhs;
    std::string why;
    if (!ConvolutionViews(*core, &lhs, &rhs, &call.convolution, &why) ||
        lhs.base->opcode() != HloOpcode::kParameter || rhs.base->opcode() != HloOpcode::kParameter) {
      return std::nullopt;
    }
    call.lhs_parameter = lhs.base->parameter_number();
    call.rhs_parameter = rhs.base->parameter_number();
    if (call.convolution.kind != OneDnnConvolution::Kind::kForward) {
      // oneDNN's backward passes take no post-ops.
      if (core != computation.root_instruction()) return std::nullopt;
      return call;
    }
  } else if (!operand(core->operand(0), &call.lhs_parameter, &call.lhs_transposed, &call.lhs_offset) ||
             !operand(core->operand(1), &call.rhs_parameter, &call.rhs_transposed, &call.rhs_offset)) {
    return std::nullopt;
  }
  HloInstruction* end = nullptr;
  for (ChainStep& step : FindChain(core, &end)) {
    for (OneDnnPostOp& op : step.ops) {
      if (op.kind == OneDnnPostOp::Kind::kAdd) {
        if (step.addend->opcode() != HloOpcode::kParameter) return std::nullopt;
        op.parameter = step.addend->parameter_number();
      }
      call.post_ops.push_back(op);
    }
  }
  if (end != computation.root_instruction()) return std::nullopt;
  return call;
}

StatusOr<bool> OneDnnRewriter::Run(HloModule& module) {
  decisions_.clear();
  bool changed = false;
  for (HloComputation* computation : FusibleComputations(module)) {
    ASSIGN_OR_RETURN(bool c, RewriteComputation(*computation));
    changed |= c;
  }
  return changed;
}

StatusOr<bool> OneDnnRewriter::RewriteComputation(HloComputation& computation) {
  std::vector<std::pair<std::string, std::string>> sunk;
  ASSIGN_OR_RETURN(bool changed, SinkTransposesIntoProducts(computation, &sunk));
  for (const auto& [transpose, dot] : sunk) {
    decisions_.push_back({transpose, dot, true,
                          "the transpose of the product computed as the product of the transposed operands "
                          "in swapped order, read in place (no transpose)",
                          "kCustom", ""});
  }
  std::vector<HloInstruction*> cores;
  for (HloInstruction* i : computation.MakeInstructionPostOrder()) {
    if (i->opcode() == HloOpcode::kDot || i->opcode() == HloOpcode::kConvolution) cores.push_back(i);
  }
  for (HloInstruction* core : cores) {
    const std::string core_name = core->name();
    if (std::string why = RefusalReason(*core); !why.empty()) {
      decisions_.push_back({core_name, "", false, why + "; left to Eigen", "", ""});
      continue;
    }
    FusionPlan plan;
    std::vector<std::pair<std::string, std::string>> absorbed;  // name, what it became
    plan.members.push_back(core);
    std::unordered_set<const HloInstruction*> seen{core};
    auto add = [&](HloInstruction* m, const std::string& note) {
      if (!seen.insert(m).second) return;
      plan.members.push_back(m);
      // Shared constants, broadcasts and transposes are cloned into the call and stay outside;
      // the chain's own values have no outside use but the last (FindChain sees to that).
      const bool helper = m->opcode() == HloOpcode::kBroadcast || m->opcode() == HloOpcode::kTranspose ||
                          m->opcode() == HloOpcode::kSlice;
      if (helper && UseCount(*m) > 1) plan.duplicated.push_back(m);
      if (!note.empty()) absorbed.push_back({m->name(), note});
    };
    if (core->opcode() == HloOpcode::kDot) {
      for (HloInstruction* o : core->operands()) {
        bool stays = false;  // what `o` reads stays outside too
        if (IsMinorTranspose(*o)) {
          add(o, "operand read in place through strides (no transpose)");
          stays = UseCount(*o) > 1;
          o = o->operand(0);
        }
        // The slices batched-chain-split takes of q, k and v, 2 MiB each over attention's
        // f32[8,1024,64], were copied by a loop fusion before the chains (0.2-0.3 ms of a 12-15
        // ms run): the call reads each in place instead. A slice below a transpose that stays
        // outside (k's, shared by two chains' products) is cloned in and stays outside too.
        // So are the reshapes that keep their operand's bytes where they lie, above a slice (a
        // head of q taken as reshape(slice(q))) or a whole array (a batch flattened into rows,
        // which a loop copied: 1 MiB for [4,256,64] -> [1024,64]). One that stays outside for
        // another user keeps all below it outside.
        auto keep_outside = [&](HloInstruction* v) {
          if (stays && std::find(plan.duplicated.begin(), plan.duplicated.end(), v) == plan.duplicated.end()) {
            plan.duplicated.push_back(v);
          }
        };
        for (; IsRowMajorBitcast(*o); o = o->operand(0)) {
          add(o, "reshape read in place (the same bytes)");
          stays |= UseCount(*o) > 1 || o->IsRoot();
          keep_outside(o);
        }
        if (ContiguousSliceOffset(*o) >= 0) {
          add(o, "operand read in place at its offset (no slice copied)");
          keep_outside(o);
        }
      }
    }
    bool post_ops = true;
    if (core->opcode() == HloOpcode::kConvolution) {
      OneDnnOperandView lhs, rhs;
      OneDnnConvolution convolution;
      std::string why;
      ConvolutionViews(*core, &lhs, &rhs, &convolution, &why);
      // oneDNN's backward passes take no post-ops; their epilogue stays with the loop fusions.
      post_ops = convolution.kind == OneDnnConvolution::Kind::kForward;
      for (const OneDnnOperandView* view : {&lhs, &rhs}) {
        // Once a transpose or reverse of the chain stays outside for another user, so must every
        // one below it.
        bool stays = false;
        for (const HloInstruction* a : view->absorbed) {
          HloInstruction* m = const_cast<HloInstruction*>(a);
          if (!seen.insert(m).second) continue;
          plan.members.push_back(m);
          stays |= UseCount(*m) > 1 || m->IsRoot();
          if (stays) plan.duplicated.push_back(m);
          absorbed.push_back({m->name(), m->opcode() == HloOpcode::kReverse
                                             ? "kernel read unreversed by " + convolution.ToString()
                                             : "operand read in place through strides (no transpose)"});
        }
      }
    }
    HloInstruction* end = nullptr;
    for (const ChainStep& step : post_ops ? FindChain(core, &end) : std::vector<ChainStep>{}) {
      std::string names;
      for (const OneDnnPostOp& op : step.ops) names += (names.empty() ? "" : " + ") + OneDnnPostOpName(op);
      for (HloInstruction* m : step.members) {
        const bool helper = m->opcode() == HloOpcode::kConstant ||
                            (m->opcode() == HloOpcode::kBroadcast && m->operand(0)->opcode() == HloOpcode::kConstant);
        add(m, helper ? "" : (step.ops.size() == 1 ? "oneDNN post-op " : "oneDNN post-ops ") + names);
      }
    }
    // A constant stays outside too when anything outside, or a broadcast that stays, reads it.
    const std::unordered_set<const HloInstruction*> kept(plan.duplicated.begin(), plan.duplicated.end());
    for (HloInstruction* m : plan.members) {
      if (m->opcode() != HloOpcode::kConstant) continue;
      const bool outside = m->IsRoot() || std::any_of(m->users().begin(), m->users().end(), [&](const HloInstruction* u) {
                             return !seen.count(u) || kept.count(u);
                           });
      if (outside) plan.duplicated.push_back(m);
    }
    if (const HloInstruction* witness = FindCycleWitness(plan); witness != nullptr) {
      decisions_.push_back({core_name, "", false,
                            fmt::format("absorbing its epilogue would form a cycle through %{}",
                                        witness->name()),
                            "", ""});
      continue;
    }
    ASSIGN_OR_RETURN(HloInstruction* fusion, BuildFusion(plan));
    fusion->fusion_kind = FusionKind::kCustom;
    std::optional<OneDnnCall> call = MatchOneDnnCall(*fusion);
    if (!call) {
      return Error(fmt::format("onednn-rewriter: %{} does not read back as a oneDNN call", fusion->name()));
    }
    decisions_.push_back({core_name, core_name, true, "oneDNN " + call->ToString(), "kCustom",
                          fusion->name()});
    for (const auto& [name, note] : absorbed) {
      decisions_.push_back({name, core_name, true, note, "kCustom", fusion->name()});
    }
    changed = true;
  }
  return changed;
}

}  // namespace xlens
