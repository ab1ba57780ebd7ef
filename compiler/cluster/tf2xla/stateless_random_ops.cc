// The stateless random ops Keras 3 emits for dropout, as TensorFlow's XLA lowers them on CPU
// (stateless_random_ops_v2.cc over xla/hlo/builder/lib/prng.cc), bit for bit with
// tf.function(jit_compile=True):
//   StatelessRandomGetKeyCounter[Alg]  one Philox-4x32 block whose counter is the seed's words
//       under the fixed key (0x3ec8f720, 0x02461e29): key = words 0-1, counter = (0, words 2-3).
//       Each seed is cut to its low 32 bits and zero-extended, where TensorFlow's CPU kernel
//       sign-extends an int32 seed and keeps an int64 one whole, so such seeds give another
//       stream compiled than op by op, in TensorFlow as here.
//   StatelessRandomUniformV2  rng-bit-generator (Philox) from the state (key, counter), each
//       32-bit word's upper 23 bits made the mantissa of a float in [1, 2), less 1. TensorFlow's
//       CPU kernel takes the lower 23 bits of the same words, so compiled and op-by-op dropout
//       masks differ in TensorFlow too; xlens's compiled masks are TensorFlow's compiled ones.
//   StatelessRandomNormalV2  Box-Muller on consecutive pairs of such uniforms, within the
//       rounding of sin, cos and log of TensorFlow's compiled normals.
//   StatelessTruncatedNormalV2  the inverse normal CDF of a uniform in [FLT_MIN, 1), mapped
//       between the CDF at -2 and at 2 (tf2xla's TruncatedNormal over XLA's ErfInv: Giles'
//       polynomials in -log1p(-x^2)), clamped to [-2, 2].
//   StatelessRandomUniformIntV2  XLA's ConvertRandomBitsToUniformInt: each Philox word (two for
//       64-bit types) modulo the range, added to minval in two halves so it cannot overflow.
//   StatelessRandomGetAlg  Philox (1), TensorFlow's choice on CPU.
//   StatelessRandomUniform, StatelessRandomNormal, StatelessTruncatedNormal (V1)  the seed's key
//       and counter, then as V2.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

constexpr PrimitiveType kU32 = PrimitiveType::U32;
constexpr PrimitiveType kU64 = PrimitiveType::U64;
// TensorFlow's Algorithm enum: RNG_ALG_PHILOX, RNG_ALG_THREEFRY, RNG_ALG_AUTO_SELECT.
constexpr int64_t kAlgPhilox = 1;
constexpr int64_t kAlgAutoSelect = 3;

// Element `i` of the vector `v` as a [1] vector.
StatusOr<HloInstruction*> Element(HloBuilder& b, HloInstruction* v, int64_t i) {
  return b.Slice(v, {i}, {i + 1}, {1});
}

// Philox bits of `values` from the u64[3] state (key, counter low, counter high).
StatusOr<HloInstruction*> PhiloxBits(HloBuilder& b, HloInstruction* state, const Shape& values) {
  auto rng = std::make_unique<HloInstruction>(HloOpcode::kRngBitGenerator,
                                              Shape::Tuple({state->shape(), values}));
  rng->AppendOperand(state);
  rng->SetRawAttribute("algorithm", "rng_philox");
  ASSIGN_OR_RETURN(HloInstruction * out, b.Add(std::move(rng)));
  return b.GetTupleElement(out, 1);
}

// lo | hi << 32 of two u32 [1] vectors, as u64.
StatusOr<HloInstruction*> Join(HloBuilder& b, HloInstruction* lo, HloInstruction* hi) {
  ASSIGN_OR_RETURN(HloInstruction * lo64, b.Convert(lo, kU64));
  ASSIGN_OR_RETURN(HloInstruction * hi64, b.Convert(hi, kU64));
  ASSIGN_OR_RETURN(HloInstruction * shift, b.FullConstant(kU64, 32, {1}));
  ASSIGN_OR_RETURN(HloInstruction * high, b.Binary(HloOpcode::kShiftLeft, hi64, shift));
  return b.Binary(HloOpcode::kOr, lo64, high);
}

struct KeyCounter {
  HloInstruction* key = nullptr;      // u64[1]
  HloInstruction* counter = nullptr;  // u64[2]
};

// The key and counter of a [2] seed, as XLA derives them (see the file comment).
StatusOr<KeyCounter> FromSeed(XlaOpKernelContext& ctx, HloInstruction* seed) {
  if (seed->shape().dimensions() != std::vector<int64_t>{2}) {
    return ctx.Error("seed must have shape [2], not " + seed->shape().ToString(false));
  }
  HloBuilder& b = ctx.builder();
  HloInstruction* words = seed;
  if (seed->shape().element_type() == PrimitiveType::S32) {
    LOWER_OR_RETURN(words, ctx, b.BitcastConvert(seed, kU32));  // zero-extended below, as XLA's
    LOWER_OR_RETURN(words, ctx, b.Convert(words, kU64));
  } else {
    // XLA keeps only the low 32 bits of each int64 seed (measured against TensorFlow 2.21).
    LOWER_OR_RETURN(words, ctx, b.BitcastConvert(seed, kU64));
    LOWER_OR_RETURN(HloInstruction * low, ctx, b.FullConstant(kU64, 4294967295.0, {2}));
    LOWER_OR_RETURN(words, ctx, b.Binary(HloOpcode::kAnd, words, low));
  }
  Literal scramble(Shape(kU64, {1}));
  scramble.data<uint64_t>()[0] = 0x02461e293ec8f720ULL;  // (0x3ec8f720, 0x02461e29)
  LOWER_OR_RETURN(HloInstruction * scramble_key, ctx, b.Constant(std::move(scramble)));
  LOWER_OR_RETURN(HloInstruction * state, ctx, b.Concatenate({scramble_key, words}, 0));
  LOWER_OR_RETURN(HloInstruction * mix, ctx, PhiloxBits(b, state, Shape(kU32, {4})));
  std::vector<HloInstruction*> w(4);
  for (int64_t i = 0; i < 4; ++i) {
    LOWER_OR_RETURN(w[i], ctx, Element(b, mix, i));
  }
  KeyCounter out;
  LOWER_OR_RETURN(out.key, ctx, Join(b, w[0], w[1]));
  LOWER_OR_RETURN(HloInstruction * high, ctx, Join(b, w[2], w[3]));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.FullConstant(kU64, 0, {1}));
  LOWER_OR_RETURN(out.counter, ctx, b.Concatenate({zero, high}, 0));
  return out;
}

Status GetKeyCounterLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * seed, ctx.Input(0));
  ASSIGN_OR_RETURN(KeyCounter kc, FromSeed(ctx, seed));
  ctx.SetOutput(0, kc.key);
  ctx.SetOutput(1, kc.counter);
  if (ctx.num_outputs() > 2) {
    ctx.SetConstantOutput(2, graph::Tensor::Scalar<int32_t>(graph::DT_INT32, kAlgPhilox));
  }
  return OkStatus();
}

// The key and counter inputs 1 and 2 of a V2 op, its algorithm input 3 checked.
StatusOr<KeyCounter> V2KeyCounter(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> alg, ctx.ConstantInputAsIntVector(3));
  if (alg.size() != 1 || (alg[0] != kAlgPhilox && alg[0] != kAlgAutoSelect)) {
    return ctx.Error(fmt::format("the algorithm {} is not compiled: Philox (1) and auto-select (3) "
                                 "are, as on TensorFlow's CPU",
                                 alg.empty() ? -1 : alg[0]));
  }
  KeyCounter kc;
  ASSIGN_OR_RETURN(kc.key, ctx.Input(1));
  ASSIGN_OR_RETURN(kc.counter, ctx.Input(2));
  if (kc.key->shape().dimensions() != std::vector<int64_t>{1} || kc.counter->shape().rank() != 1 ||
      kc.counter->shape().dimensions()[0] < 2) {
    return ctx.Error(fmt::format("key must be u64[1] and counter u64[2], not {} and {}",
                                 kc.key->shape().ToString(false),
                                 kc.counter->shape().ToString(false)));
  }
  if (kc.counter->shape().dimensions()[0] > 2) {
    LOWER_OR_RETURN(kc.counter, ctx, ctx.builder().Slice(kc.counter, {0}, {2}, {1}));
  }
  return kc;
}

// Floats in [0, 1) of the shape input 0 from the Philox stream of `kc`: each word's upper 23
// bits as the mantissa of a float in [1, 2), less 1 (XLA's
// ConvertRandomBitsToUniformFloatingPoint).
StatusOr<HloInstruction*> UniformOf(XlaOpKernelContext& ctx, const KeyCounter& kc,
                                    const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("dtype"));
  if (dtype != graph::DT_FLOAT) {
    return ctx.Error("the stateless random ops compile for float32 (Keras's dropout) only");
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * state, ctx, b.Concatenate({kc.key, kc.counter}, 0));
  LOWER_OR_RETURN(HloInstruction * bits, ctx, PhiloxBits(b, state, Shape(kU32, dims)));
  LOWER_OR_RETURN(HloInstruction * nine, ctx, b.FullConstant(kU32, 9, dims));
  LOWER_OR_RETURN(HloInstruction * mantissa, ctx,
                  b.Binary(HloOpcode::kShiftRightLogical, bits, nine));
  LOWER_OR_RETURN(HloInstruction * exponent, ctx, b.FullConstant(kU32, 0x3f800000, dims));
  LOWER_OR_RETURN(HloInstruction * word, ctx, b.Binary(HloOpcode::kOr, mantissa, exponent));
  LOWER_OR_RETURN(HloInstruction * in_one_two, ctx, b.BitcastConvert(word, PrimitiveType::F32));
  LOWER_OR_RETURN(HloInstruction * one, ctx, b.FullConstant(PrimitiveType::F32, 1, dims));
  HloInstruction* values = nullptr;
  LOWER_OR_RETURN(values, ctx, b.Binary(HloOpcode::kSubtract, in_one_two, one));
  return values;
}

StatusOr<std::vector<int64_t>> ShapeInput(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(0));
  for (int64_t d : dims) {
    if (d < 0) return ctx.Error("the shape must not have negative dimensions");
  }
  return dims;
}

StatusOr<HloInstruction*> Uniform(XlaOpKernelContext& ctx, const KeyCounter& kc) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ShapeInput(ctx));
  return UniformOf(ctx, kc, dims);
}

// XLA's NormalFloatingPointDistribution: Box-Muller on consecutive pairs of the stream's uniforms,
// an odd last dimension generated one longer and its last column dropped: with
// r = sqrt(-2 log(max(u0, 1e-7))) and t = 2 pi u1, the pair gives r sin t and r cos t (the layout
// measured against TensorFlow 2.21).
StatusOr<HloInstruction*> Normal(XlaOpKernelContext& ctx, const KeyCounter& kc) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ShapeInput(ctx));
  std::vector<int64_t> even = dims.empty() ? std::vector<int64_t>{1} : dims;
  const int64_t last = even.back();
  even.back() += last % 2;
  int64_t n = 1;
  for (int64_t d : even) n *= d;
  const int64_t pairs = n / 2;
  ASSIGN_OR_RETURN(HloInstruction * u, UniformOf(ctx, kc, {pairs * 2}));
  HloBuilder& b = ctx.builder();
  constexpr PrimitiveType kF32 = PrimitiveType::F32;
  LOWER_OR_RETURN(HloInstruction * grid, ctx, b.Reshape(u, {pairs, 2}));
  LOWER_OR_RETURN(HloInstruction * u0, ctx, b.Slice(grid, {0, 0}, {pairs, 1}, {1, 1}));
  LOWER_OR_RETURN(HloInstruction * u1, ctx, b.Slice(grid, {0, 1}, {pairs, 2}, {1, 1}));
  const std::vector<int64_t> col{pairs, 1};
  LOWER_OR_RETURN(HloInstruction * tiny, ctx, b.FullConstant(kF32, 1.0e-7f, col));
  LOWER_OR_RETURN(HloInstruction * clamped, ctx, b.Binary(HloOpcode::kMaximum, u0, tiny));
  LOWER_OR_RETURN(HloInstruction * two_pi, ctx,
                  b.FullConstant(kF32, static_cast<float>(2.0 * 3.14159265358979323846), col));
  LOWER_OR_RETURN(HloInstruction * t, ctx, b.Binary(HloOpcode::kMultiply, two_pi, u1));
  LOWER_OR_RETURN(HloInstruction * minus_two, ctx, b.FullConstant(kF32, -2, col));
  LOWER_OR_RETURN(HloInstruction * log, ctx, b.Unary(HloOpcode::kLog, clamped));
  LOWER_OR_RETURN(HloInstruction * r2, ctx, b.Binary(HloOpcode::kMultiply, minus_two, log));
  LOWER_OR_RETURN(HloInstruction * r, ctx, b.Unary(HloOpcode::kSqrt, r2));
  LOWER_OR_RETURN(HloInstruction * sin, ctx, b.Unary(HloOpcode::kSin, t));
  LOWER_OR_RETURN(HloInstruction * cos, ctx, b.Unary(HloOpcode::kCos, t));
  LOWER_OR_RETURN(HloInstruction * first, ctx, b.Binary(HloOpcode::kMultiply, sin, r));
  LOWER_OR_RETURN(HloInstruction * second, ctx, b.Binary(HloOpcode::kMultiply, cos, r));
  LOWER_OR_RETURN(HloInstruction * both, ctx, b.Concatenate({first, second}, 1));
  HloInstruction* normal = nullptr;
  LOWER_OR_RETURN(normal, ctx, b.Reshape(both, even));
  if (even.back() != last) {
    std::vector<int64_t> starts(even.size(), 0), limits = even, strides(even.size(), 1);
    limits.back() = last;
    LOWER_OR_RETURN(normal, ctx, b.Slice(normal, starts, limits, strides));
  }
  if (dims.empty()) {
    LOWER_OR_RETURN(normal, ctx, b.Reshape(normal, dims));
  }
  return normal;
}

// Elementwise f32 arithmetic with scalar constants broadcast to `dims`.
class F32Math {
 public:
  F32Math(XlaOpKernelContext& ctx, std::vector<int64_t> dims) : ctx_(ctx), dims_(std::move(dims)) {}
  StatusOr<HloInstruction*> C(float v) {
    return ctx_.builder().FullConstant(PrimitiveType::F32, v, dims_);
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, HloInstruction* x, HloInstruction* y) {
    return ctx_.builder().Binary(op, x, y);
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, HloInstruction* x, float y) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(y));
    return Op(op, x, c);
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, float x, HloInstruction* y) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(x));
    return Op(op, c, y);
  }
  StatusOr<HloInstruction*> F(HloOpcode op, HloInstruction* x) {
    return ctx_.builder().Unary(op, x);
  }
  // clamp(lo, x, hi)
  StatusOr<HloInstruction*> Clamp(float lo, HloInstruction* x, float hi) {
    ASSIGN_OR_RETURN(HloInstruction * above, Op(HloOpcode::kMaximum, x, lo));
    return Op(HloOpcode::kMinimum, above, hi);
  }

 private:
  XlaOpKernelContext& ctx_;
  std::vector<int64_t> dims_;
};

// XLA's ErfInv for f32: Giles' single-precision polynomials in w = -log1p(-x^2), split at
// w = 5; +-1 give +-FLT_MAX times x.
StatusOr<HloInstruction*> ErfInv32(XlaOpKernelContext& ctx, F32Math& m, HloInstruction* x) {
  static constexpr float kSmall[] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                     -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                     -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kLarge[] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                     -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                     0.00943887047f,   1.00167406f,     2.83297682f};
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * xx, ctx, m.Op(HloOpcode::kMultiply, x, x));
  LOWER_OR_RETURN(HloInstruction * neg, ctx, m.F(HloOpcode::kNegate, xx));
  LOWER_OR_RETURN(HloInstruction * log1p, ctx, m.F(HloOpcode::kLog1p, neg));
  LOWER_OR_RETURN(HloInstruction * w, ctx, m.F(HloOpcode::kNegate, log1p));
  LOWER_OR_RETURN(HloInstruction * five, ctx, m.C(5.0f));
  LOWER_OR_RETURN(HloInstruction * lt, ctx, b.Compare(w, five, ComparisonDirection::kLt));
  LOWER_OR_RETURN(HloInstruction * w_small, ctx, m.Op(HloOpcode::kSubtract, w, 2.5f));
  LOWER_OR_RETURN(HloInstruction * sqrt_w, ctx, m.F(HloOpcode::kSqrt, w));
  LOWER_OR_RETURN(HloInstruction * w_large, ctx, m.Op(HloOpcode::kSubtract, sqrt_w, 3.0f));
  LOWER_OR_RETURN(HloInstruction * t, ctx, b.Select(lt, w_small, w_large));
  auto coefficient = [&](int i) -> StatusOr<HloInstruction*> {
    ASSIGN_OR_RETURN(HloInstruction * small, m.C(kSmall[i]));
    ASSIGN_OR_RETURN(HloInstruction * large, m.C(kLarge[i]));
    return b.Select(lt, small, large);
  };
  LOWER_OR_RETURN(HloInstruction * p, ctx, coefficient(0));
  for (int i = 1; i < 9; ++i) {
    LOWER_OR_RETURN(HloInstruction * c, ctx, coefficient(i));
    LOWER_OR_RETURN(HloInstruction * pw, ctx, m.Op(HloOpcode::kMultiply, p, t));
    LOWER_OR_RETURN(p, ctx, m.Op(HloOpcode::kAdd, c, pw));
  }
  LOWER_OR_RETURN(HloInstruction * result, ctx, m.Op(HloOpcode::kMultiply, p, x));
  LOWER_OR_RETURN(HloInstruction * abs, ctx, m.F(HloOpcode::kAbs, x));
  LOWER_OR_RETURN(HloInstruction * one, ctx, m.C(1.0f));
  LOWER_OR_RETURN(HloInstruction * at_one, ctx, b.Compare(abs, one, ComparisonDirection::kEq));
  LOWER_OR_RETURN(HloInstruction * edge, ctx, m.Op(HloOpcode::kMultiply, x, FLT_MAX));
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, b.Select(at_one, edge, result));
  return out;
}

// tf2xla's TruncatedNormal (mu 0, sigma 1, bounds -2 and 2) of uniforms in [FLT_MIN, 1): the
// normal CDF's values at the bounds are constants XLA folds in f32.
StatusOr<HloInstruction*> TruncatedNormal(XlaOpKernelContext& ctx, const KeyCounter& kc) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ShapeInput(ctx));
  ASSIGN_OR_RETURN(HloInstruction * u01, UniformOf(ctx, kc, dims));
  F32Math m(ctx, dims);
  // values * (maxval - minval) + minval, maxval - minval being 1 in f32.
  const float min_positive = FLT_MIN;
  LOWER_OR_RETURN(HloInstruction * scaled, ctx,
                  m.Op(HloOpcode::kMultiply, u01, 1.0f - min_positive));
  LOWER_OR_RETURN(HloInstruction * u, ctx, m.Op(HloOpcode::kAdd, scaled, min_positive));
  const float sqrt_2 = static_cast<float>(std::sqrt(2.0));
  auto normal_cdf = [&](float x) { return (1.0f + std::erf(x / sqrt_2)) / 2.0f; };
  const float alpha_cdf = normal_cdf(-2.0f), beta_cdf = normal_cdf(2.0f);
  LOWER_OR_RETURN(HloInstruction * spread, ctx,
                  m.Op(HloOpcode::kMultiply, beta_cdf - alpha_cdf, u));
  LOWER_OR_RETURN(HloInstruction * p, ctx, m.Op(HloOpcode::kAdd, alpha_cdf, spread));
  LOWER_OR_RETURN(HloInstruction * two_p, ctx, m.Op(HloOpcode::kMultiply, 2.0f, p));
  LOWER_OR_RETURN(HloInstruction * v, ctx, m.Op(HloOpcode::kSubtract, two_p, 1.0f));
  LOWER_OR_RETURN(v, ctx, m.Clamp(-1.0f + FLT_EPSILON, v, 1.0f - FLT_EPSILON));
  ASSIGN_OR_RETURN(HloInstruction * e, ErfInv32(ctx, m, v));
  LOWER_OR_RETURN(HloInstruction * x, ctx, m.Op(HloOpcode::kMultiply, 1.0f * sqrt_2, e));
  LOWER_OR_RETURN(x, ctx, m.Op(HloOpcode::kAdd, 0.0f, x));
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, m.Clamp(-2.0f, x, 2.0f));
  return out;
}

using Distribution = StatusOr<HloInstruction*> (*)(XlaOpKernelContext&, const KeyCounter&);

template <Distribution kDist>
Status V2Lowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(KeyCounter kc, V2KeyCounter(ctx));
  ASSIGN_OR_RETURN(HloInstruction * values, kDist(ctx, kc));
  ctx.SetOutput(0, values);
  return OkStatus();
}

// The V1 ops (shape, seed): the seed's key and counter, then as V2 (TensorFlow's compiled V1 and
// V2 streams are the same, measured).
template <Distribution kDist>
Status V1Lowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * seed, ctx.Input(1));
  ASSIGN_OR_RETURN(KeyCounter kc, FromSeed(ctx, seed));
  ASSIGN_OR_RETURN(HloInstruction * values, kDist(ctx, kc));
  ctx.SetOutput(0, values);
  return OkStatus();
}

// StatelessRandomUniformIntV2 (shape, key, counter, alg, minval, maxval): XLA's
// UniformIntDistribution over the Philox words of the unsigned type of the same width.
Status UniformIntV2Lowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(KeyCounter kc, V2KeyCounter(ctx));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ShapeInput(ctx));
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("dtype"));
  ASSIGN_OR_RETURN(PrimitiveType type, XlaType(ctx, dtype));
  const bool wide = type == PrimitiveType::S64 || type == PrimitiveType::U64;
  const PrimitiveType unsigned_type = wide ? kU64 : kU32;
  if (type != PrimitiveType::S32 && type != PrimitiveType::S64 && type != PrimitiveType::U32 &&
      type != PrimitiveType::U64) {
    return ctx.Error("uniform integers compile for int32, int64, uint32 and uint64, not " +
                     graph::DataTypeName(dtype));
  }
  for (int i : {4, 5}) {
    if (ctx.InputShape(i).size() != 0) {
      return ctx.Error(fmt::format("{} must be scalar, got shape {}", i == 4 ? "minval" : "maxval",
                                   graph::DimsToString(ctx.InputShape(i))));
    }
  }
  if (ctx.input_expression(4).kind() == XlaExpression::Kind::kConstant &&
      ctx.input_expression(5).kind() == XlaExpression::Kind::kConstant) {
    ASSIGN_OR_RETURN(graph::Tensor lo, ctx.ConstantInput(4));
    ASSIGN_OR_RETURN(graph::Tensor hi, ctx.ConstantInput(5));
    if (lo.GetAsInt64(0) >= hi.GetAsInt64(0)) {
      return ctx.Error(fmt::format("Need minval < maxval, got {} >= {}", lo.GetAsInt64(0),
                                   hi.GetAsInt64(0)));
    }
  }
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(HloInstruction * minval, ctx.Input(4));
  ASSIGN_OR_RETURN(HloInstruction * maxval, ctx.Input(5));
  LOWER_OR_RETURN(HloInstruction * state, ctx, b.Concatenate({kc.key, kc.counter}, 0));
  LOWER_OR_RETURN(HloInstruction * bits, ctx, PhiloxBits(b, state, Shape(unsigned_type, dims)));
  LOWER_OR_RETURN(HloInstruction * umax, ctx, b.BitcastConvert(maxval, unsigned_type));
  LOWER_OR_RETURN(HloInstruction * umin, ctx, b.BitcastConvert(minval, unsigned_type));
  LOWER_OR_RETURN(HloInstruction * range, ctx, b.Binary(HloOpcode::kSubtract, umax, umin));
  LOWER_OR_RETURN(range, ctx, b.BroadcastTo(range, dims));
  LOWER_OR_RETURN(HloInstruction * dist, ctx, b.Binary(HloOpcode::kRemainder, bits, range));
  LOWER_OR_RETURN(HloInstruction * one, ctx, b.FullConstant(unsigned_type, 1, dims));
  LOWER_OR_RETURN(HloInstruction * half, ctx,
                  b.Binary(HloOpcode::kShiftRightLogical, dist, one));
  LOWER_OR_RETURN(HloInstruction * rest, ctx, b.Binary(HloOpcode::kSubtract, dist, half));
  LOWER_OR_RETURN(HloInstruction * half_t, ctx, b.BitcastConvert(half, type));
  LOWER_OR_RETURN(HloInstruction * rest_t, ctx, b.BitcastConvert(rest, type));
  LOWER_OR_RETURN(HloInstruction * lo, ctx, b.BroadcastTo(minval, dims));
  LOWER_OR_RETURN(HloInstruction * sum, ctx, b.Binary(HloOpcode::kAdd, lo, half_t));
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, b.Binary(HloOpcode::kAdd, sum, rest_t));
  ctx.SetOutput(0, out);
  return OkStatus();
}

Status GetAlgLowering(XlaOpKernelContext& ctx) {
  ctx.SetConstantOutput(0, graph::Tensor::Scalar<int32_t>(graph::DT_INT32, kAlgPhilox));
  return OkStatus();
}

}  // namespace

void RegisterStatelessRandomXlaOps(XlaOpRegistry& r) {
  r.Register("StatelessRandomGetKeyCounter", GetKeyCounterLowering);
  r.Register("StatelessRandomGetKeyCounterAlg", GetKeyCounterLowering);
  r.Register("StatelessRandomUniformV2", V2Lowering<Uniform>);
  r.Register("StatelessRandomNormalV2", V2Lowering<Normal>);
  r.Register("StatelessRandomUniform", V1Lowering<Uniform>);
  r.Register("StatelessRandomNormal", V1Lowering<Normal>);
  r.Register("StatelessTruncatedNormalV2", V2Lowering<TruncatedNormal>);
  r.Register("StatelessTruncatedNormal", V1Lowering<TruncatedNormal>);
  r.Register("StatelessRandomUniformIntV2", UniformIntV2Lowering);
  r.Register("StatelessRandomGetAlg", GetAlgLowering);
}

}  // namespace xlens::cluster
