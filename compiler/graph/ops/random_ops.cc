// Random ops (TensorFlow's random_ops.cc and stateless_random_ops[_v2].cc), drawing exactly
// TensorFlow's numbers through philox_random.h. A stateful op keeps its generator in the node's
// KernelState, so repeated runs in one session continue the stream as TensorFlow's shared kernel
// does; stateless ops start from their seed or key/counter inputs every time.
#include <functional>
#include <memory>
#include <mutex>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/philox_random.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

enum class Distribution { kUniform, kNormal, kTruncatedNormal };

Status ShapeFromInput0(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, c.MakeShapeFromShapeTensor(0));
  c.set_output(0, shape);
  return OkStatus();
}

StatusOr<std::vector<int64_t>> OutputDims(const OpKernelContext& c) {
  const Tensor& shape = c.input(0);
  if (shape.rank() != 1) {
    return c.Error("shape must be a vector of {int32,int64}, got shape " +
                   DimsToString(shape.dims()));
  }
  std::vector<int64_t> dims = shape.AsInt64Vector();
  for (int64_t d : dims) {
    if (d < 0) return c.Error("Dimension " + std::to_string(d) + " must be >= 0");
  }
  return dims;
}

// The node's generator, created from seed/seed2 on its first run.
struct GeneratorState {
  std::mutex mu;
  GuardedPhilox philox;
};

StatusOr<PhiloxRandom> ReserveStateful(OpKernelContext& c, int64_t outputs) {
  ASSIGN_OR_RETURN(int64_t seed, IntAttr(c, "seed"));
  ASSIGN_OR_RETURN(int64_t seed2, IntAttr(c, "seed2"));
  std::shared_ptr<GeneratorState> state;
  if (c.state() != nullptr) {
    if (auto* held = std::any_cast<std::shared_ptr<GeneratorState>>(&c.state()->value)) {
      state = *held;
    } else {
      state = std::make_shared<GeneratorState>();
      c.state()->value = state;
    }
  } else {
    state = std::make_shared<GeneratorState>();
  }
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->philox.initialized()) state->philox.Init(seed, seed2);
  return state->philox.ReserveRandomOutputs(outputs);
}

Status Fill(OpKernelContext& c, Distribution dist, const PhiloxRandom& gen, Tensor& out) {
  const int64_t n = out.num_elements();
  switch (out.dtype()) {
    case DT_FLOAT: {
      float* p = out.flat<float>().data();
      if (dist == Distribution::kUniform) FillUniform(gen, p, n);
      if (dist == Distribution::kNormal) FillNormal(gen, p, n);
      if (dist == Distribution::kTruncatedNormal) FillTruncatedNormal(gen, p, n);
      return OkStatus();
    }
    case DT_DOUBLE: {
      double* p = out.flat<double>().data();
      if (dist == Distribution::kUniform) FillUniform(gen, p, n);
      if (dist == Distribution::kNormal) FillNormal(gen, p, n);
      if (dist == Distribution::kTruncatedNormal) FillTruncatedNormal(gen, p, n);
      return OkStatus();
    }
    default:
      return c.Error("random numbers of type " + DataTypeName(out.dtype()) +
                     " are not implemented on the CPU executor (float and double are)");
  }
}

Status StatefulKernel(OpKernelContext& c, Distribution dist) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(c));
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  ASSIGN_OR_RETURN(PhiloxRandom gen, ReserveStateful(c, out->num_elements()));
  return Fill(c, dist, gen, *out);
}

// The minval and maxval inputs of a uniform integer op, checked before its output is made.
Status CheckScalarBounds(const OpKernelContext& c, const Tensor& lo, const Tensor& hi) {
  if (lo.rank() != 0) return c.Error("minval must be 0-D, got shape " + DimsToString(lo.dims()));
  if (hi.rank() != 0) return c.Error("maxval must be 0-D, got shape " + DimsToString(hi.dims()));
  return OkStatus();
}

// Fills `out` with integers in [lo, hi) drawn from generator() (asked only for a nonempty output
// with lo < hi: a stateful op reserves its draws then), as TensorFlow's UniformDistribution.
Status FillUniformIntBetween(const OpKernelContext& c, const Tensor& lo, const Tensor& hi,
                             const std::function<StatusOr<PhiloxRandom>()>& generator, Tensor& out) {
  if (out.num_elements() == 0) return OkStatus();
  const int64_t a = lo.GetAsInt64(0), b = hi.GetAsInt64(0);
  if (a >= b) {
    return c.Error("Need minval < maxval, got " + std::to_string(a) + " >= " +
                   std::to_string(b));
  }
  switch (out.dtype()) {
    case DT_INT32: {
      ASSIGN_OR_RETURN(PhiloxRandom gen, generator());
      FillUniformInt(gen, static_cast<int32_t>(a), static_cast<int32_t>(b),
                     out.flat<int32_t>().data(), out.num_elements());
      return OkStatus();
    }
    case DT_INT64: {
      ASSIGN_OR_RETURN(PhiloxRandom gen, generator());
      FillUniformInt(gen, a, b, out.flat<int64_t>().data(), out.num_elements());
      return OkStatus();
    }
    default:
      return c.Error("uniform integers of type " + DataTypeName(out.dtype()) +
                     " are not implemented on the CPU executor (int32 and int64 are)");
  }
}

Status RandomUniformIntKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(c));
  const Tensor &lo = c.input(1), &hi = c.input(2);
  RETURN_IF_ERROR(CheckScalarBounds(c, lo, hi));
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  return FillUniformIntBetween(
      c, lo, hi, [&] { return ReserveStateful(c, out->num_elements()); }, *out);
}

// A seed input [2] (int32 values sign-extended, as TensorFlow reads them).
StatusOr<std::pair<uint64_t, uint64_t>> SeedPair(const OpKernelContext& c, const Tensor& seed) {
  if (seed.rank() != 1 || seed.num_elements() != 2) {
    return c.Error("seed must have shape [2], not " + DimsToString(seed.dims()));
  }
  return std::pair<uint64_t, uint64_t>(static_cast<uint64_t>(seed.GetAsInt64(0)),
                                       static_cast<uint64_t>(seed.GetAsInt64(1)));
}

Status StatelessKernel(OpKernelContext& c, Distribution dist) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(c));
  ASSIGN_OR_RETURN(auto seed, SeedPair(c, c.input(1)));
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  return Fill(c, dist, StatelessPhilox(seed.first, seed.second), *out);
}

// The generator of a V2 op: its key (input 1), counter (input 2) and algorithm (input 3).
StatusOr<PhiloxRandom> V2Generator(const OpKernelContext& c) {
  const Tensor &key = c.input(1), &counter = c.input(2), &alg = c.input(3);
  if (alg.num_elements() != 1) return c.Error("alg must be a scalar, got shape " +
                                               DimsToString(alg.dims()));
  if (ResolveRngAlg(static_cast<int>(alg.GetAsInt64(0))) != kRngAlgPhilox) {
    return c.Error("Unsupported algorithm id: " + std::to_string(alg.GetAsInt64(0)));
  }
  if (key.rank() != 1 || key.num_elements() != kRngKeySize) {
    return c.Error("key must have shape [" + std::to_string(kRngKeySize) + "], not " +
                   DimsToString(key.dims()) + ". (Note that batched keys are not supported yet.)");
  }
  if (counter.rank() != 1 || counter.num_elements() < kRngMaxCounterSize) {
    return c.Error("counter must be a vector with at least " +
                   std::to_string(kRngMaxCounterSize) + " elements, got shape " +
                   DimsToString(counter.dims()));
  }
  return PhiloxFromKeyCounter(key.flat<uint64_t>().data(), counter.flat<uint64_t>().data());
}

Status StatelessV2Kernel(OpKernelContext& c, Distribution dist) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(c));
  ASSIGN_OR_RETURN(PhiloxRandom gen, V2Generator(c));
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  return Fill(c, dist, gen, *out);
}

// StatelessRandomUniformIntV2: integers in [minval, maxval) from the key and counter, as
// TensorFlow's CPU kernel draws them (its UniformDistribution, as RandomUniformInt's).
Status StatelessUniformIntV2Kernel(OpKernelContext& c) {
  const Tensor &lo = c.input(4), &hi = c.input(5);
  RETURN_IF_ERROR(CheckScalarBounds(c, lo, hi));
  ASSIGN_OR_RETURN(PhiloxRandom gen, V2Generator(c));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(c));
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  return FillUniformIntBetween(
      c, lo, hi, [&]() -> StatusOr<PhiloxRandom> { return gen; }, *out);
}

Status GetKeyCounterKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(auto seed, SeedPair(c, c.input(0)));
  uint64_t key[kRngKeySize], counter[kRngMaxCounterSize];
  GetKeyCounter(seed.first, seed.second, key, counter);
  Tensor k(DT_UINT64, {kRngKeySize}), n(DT_UINT64, {kRngMaxCounterSize});
  std::copy(key, key + kRngKeySize, k.flat<uint64_t>().begin());
  std::copy(counter, counter + kRngMaxCounterSize, n.flat<uint64_t>().begin());
  c.set_output(0, k);
  c.set_output(1, n);
  if (c.num_outputs() > 2) c.set_output(2, Tensor::Scalar<int32_t>(DT_INT32, kRngAlgPhilox));
  return OkStatus();
}

Status KeyCounterShape(InferenceContext& c) {
  PartialShape seed;
  RETURN_IF_ERROR(c.WithRank(0, 1, &seed));
  c.set_output(0, PartialShape({kRngKeySize}));
  c.set_output(1, PartialShape({kRngMaxCounterSize}));
  if (c.num_outputs() > 2) c.set_output(2, PartialShape::Scalar());
  return OkStatus();
}

}  // namespace

void RegisterRandomOps(OpRegistry& r) {
  const struct {
    const char* name;
    Distribution dist;
  } kStateful[] = {{"RandomUniform", Distribution::kUniform},
                   {"RandomStandardNormal", Distribution::kNormal},
                   {"TruncatedNormal", Distribution::kTruncatedNormal}};
  for (const auto& op : kStateful) {
    const Distribution dist = op.dist;
    REGISTER_OP(r, op.name)
        .Input("shape: T")
        .Output("output: dtype")
        .Attr("seed: int = 0")
        .Attr("seed2: int = 0")
        .Attr("dtype: {half, bfloat16, float, double}")
        .Attr("T: {int32, int64}")
        .SetIsStateful()
        .CompileTimeConstInput("shape")
        .SetShapeFn(ShapeFromInput0)
        .SetKernel([dist](OpKernelContext& c) { return StatefulKernel(c, dist); });
  }
  REGISTER_OP(r, "RandomUniformInt")
      .Input("shape: T")
      .Input("minval: Tout")
      .Input("maxval: Tout")
      .Output("output: Tout")
      .Attr("seed: int = 0")
      .Attr("seed2: int = 0")
      .Attr("Tout: {int32, int64}")
      .Attr("T: {int32, int64}")
      .SetIsStateful()
      .CompileTimeConstInput("shape")
      .SetShapeFn(ShapeFromInput0)
      .SetKernel(RandomUniformIntKernel);

  const struct {
    const char* v1;
    const char* v2;
    Distribution dist;
  } kStateless[] = {
      {"StatelessRandomUniform", "StatelessRandomUniformV2", Distribution::kUniform},
      {"StatelessRandomNormal", "StatelessRandomNormalV2", Distribution::kNormal},
      {"StatelessTruncatedNormal", "StatelessTruncatedNormalV2", Distribution::kTruncatedNormal}};
  for (const auto& op : kStateless) {
    const Distribution dist = op.dist;
    REGISTER_OP(r, op.v1)
        .Input("shape: T")
        .Input("seed: Tseed")
        .Output("output: dtype")
        .Attr("dtype: {half, bfloat16, float, double} = DT_FLOAT")
        .Attr("T: {int32, int64} = DT_INT32")
        .Attr("Tseed: {int32, int64} = DT_INT64")
        .CompileTimeConstInput("shape")
        .SetShapeFn(ShapeFromInput0)
        .SetKernel([dist](OpKernelContext& c) { return StatelessKernel(c, dist); });
    REGISTER_OP(r, op.v2)
        .Input("shape: Tshape")
        .Input("key: uint64")
        .Input("counter: uint64")
        .Input("alg: int32")
        .Output("output: dtype")
        .Attr("dtype: {half, bfloat16, float, double} = DT_FLOAT")
        .Attr("Tshape: {int32, int64} = DT_INT32")
        .CompileTimeConstInput("shape")
        .CompileTimeConstInput("alg")
        .SetShapeFn(ShapeFromInput0)
        .SetKernel([dist](OpKernelContext& c) { return StatelessV2Kernel(c, dist); });
  }
  REGISTER_OP(r, "StatelessRandomGetKeyCounter")
      .Input("seed: Tseed")
      .Output("key: uint64")
      .Output("counter: uint64")
      .Attr("Tseed: {int32, int64} = DT_INT64")
      .SetShapeFn(KeyCounterShape)
      .SetKernel(GetKeyCounterKernel);
  REGISTER_OP(r, "StatelessRandomGetKeyCounterAlg")
      .Input("seed: Tseed")
      .Output("key: uint64")
      .Output("counter: uint64")
      .Output("alg: int32")
      .Attr("Tseed: {int32, int64} = DT_INT64")
      .SetShapeFn(KeyCounterShape)
      .SetKernel(GetKeyCounterKernel);
  REGISTER_OP(r, "StatelessRandomUniformIntV2")
      .Input("shape: Tshape")
      .Input("key: uint64")
      .Input("counter: uint64")
      .Input("alg: int32")
      .Input("minval: dtype")
      .Input("maxval: dtype")
      .Output("output: dtype")
      .Attr("dtype: {int32, int64, uint32, uint64}")
      .Attr("Tshape: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("shape")
      .CompileTimeConstInput("alg")
      .SetShapeFn(ShapeFromInput0)
      .SetKernel(StatelessUniformIntV2Kernel);
  // The algorithm the stateless ops use when asked to choose (RNG_ALG_AUTO_SELECT): Philox on
  // the CPU, op by op and compiled, as in TensorFlow.
  REGISTER_OP(r, "StatelessRandomGetAlg")
      .Output("alg: int32")
      .SetIsStateful()
      .SetShapeFn([](InferenceContext& c) {
        c.set_output(0, PartialShape::Scalar());
        return OkStatus();
      })
      .SetKernel([](OpKernelContext& c) {
        c.set_output(0, Tensor::Scalar<int32_t>(DT_INT32, kRngAlgPhilox));
        return OkStatus();
      });
}

}  // namespace xlens::graph
