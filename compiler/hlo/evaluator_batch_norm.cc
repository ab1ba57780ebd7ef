// batch-norm-training, batch-norm-inference and batch-norm-grad, as XLA's BatchNormExpander
// rewrites them (XLA's CPU backend runs that rewrite), step by step, each step rounded to the
// element type as the expanded HLO would be. N is the number of elements per feature.
//
//   training:  mean = sum(x) / N;  var = sum(x*x) / N - mean*mean  (biased, one pass: jaxlib's
//              variance of 300 + noise in f32 is this formula's, not a two-pass variance)
//              out = (x - mean) * rsqrt(var + eps) * scale + offset;  returns (out, mean, var)
//   inference: s = scale * rsqrt(var + eps);  out = x * s + (offset - mean * s)
//   grad:      r = rsqrt(var + eps);  grad_offset = sum(dy);  g = sum(dy * (x - mean))
//              grad_scale = g * r
//              grad_x = (scale * r / N) * (N*dy - grad_offset - (x - mean) * g / (var + eps))
//
// Sums are accumulated in double and rounded once to the element type (XLA's order of
// summation is its own; any order is within its rounding).
#include <cmath>

#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/numeric_op_attributes.h"

namespace xlens::evaluator_internal {
namespace {

// Where the feature of a linear index of the operand is: (i / inner) % features.
struct FeatureLayout {
  int64_t features = 0;
  int64_t inner = 1;
  int64_t count = 0;
  int64_t feature(int64_t i) const { return (i / inner) % features; }
};

template <typename T>
class Rounding {
 public:
  using C = ComputeType<T>;
  // v rounded to T and back.
  template <typename V>
  static C R(V v) {
    return ToCompute(FromCompute<T>(static_cast<C>(v)));
  }
  static C Rsqrt(C v) { return R(C(1) / std::sqrt(v)); }
};

template <typename T>
std::vector<ComputeType<T>> Values(const Literal& literal) {
  std::vector<ComputeType<T>> out;
  out.reserve(literal.element_count());
  for (T v : literal.data<T>()) out.push_back(ToCompute(v));
  return out;
}

template <typename T>
Literal Store(const Shape& shape, const std::vector<ComputeType<T>>& values) {
  Literal literal(shape);
  auto data = literal.data<T>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = FromCompute<T>(values[i]);
  return literal;
}

// The (array, per-feature, per-feature) tuple training and grad return.
template <typename T, typename C>
Literal StoreTriple(const Shape& shape, const std::vector<C>& array, const std::vector<C>& first,
                    const std::vector<C>& second) {
  std::vector<Literal> elements;
  elements.push_back(Store<T>(shape.tuple_shapes(0), array));
  elements.push_back(Store<T>(shape.tuple_shapes(1), first));
  elements.push_back(Store<T>(shape.tuple_shapes(2), second));
  return Literal::MakeTuple(std::move(elements));
}

template <typename T>
StatusOr<Literal> Training(const HloInstruction& instruction,
                           std::span<const Literal* const> operands, const FeatureLayout& layout,
                           double epsilon_value) {
  using C = ComputeType<T>;
  using Rd = Rounding<T>;
  const std::vector<C> x = Values<T>(*operands[0]);
  const std::vector<C> scale = Values<T>(*operands[1]);
  const std::vector<C> offset = Values<T>(*operands[2]);
  const int64_t f = layout.features;
  const C n = Rd::R(static_cast<double>(layout.count / f));
  const C epsilon = Rd::R(epsilon_value);
  std::vector<double> sum(f, 0), squares(f, 0);
  for (int64_t i = 0; i < layout.count; ++i) {
    sum[layout.feature(i)] += x[i];
    squares[layout.feature(i)] += Rd::R(x[i] * x[i]);
  }
  std::vector<C> mean(f), var(f), rsqrt(f);
  for (int64_t j = 0; j < f; ++j) {
    mean[j] = Rd::R(Rd::R(sum[j]) / n);
    const C square_mean = Rd::R(Rd::R(squares[j]) / n);
    var[j] = Rd::R(square_mean - Rd::R(mean[j] * mean[j]));
    rsqrt[j] = Rd::Rsqrt(Rd::R(var[j] + epsilon));
  }
  std::vector<C> out(layout.count);
  for (int64_t i = 0; i < layout.count; ++i) {
    const int64_t j = layout.feature(i);
    const C normalized = Rd::R(Rd::R(x[i] - mean[j]) * rsqrt[j]);
    out[i] = Rd::R(Rd::R(normalized * scale[j]) + offset[j]);
  }
  return StoreTriple<T>(instruction.shape(), out, mean, var);
}

template <typename T>
StatusOr<Literal> Inference(const HloInstruction& instruction,
                            std::span<const Literal* const> operands, const FeatureLayout& layout,
                            double epsilon_value) {
  using C = ComputeType<T>;
  using Rd = Rounding<T>;
  const std::vector<C> x = Values<T>(*operands[0]);
  const std::vector<C> scale = Values<T>(*operands[1]);
  const std::vector<C> offset = Values<T>(*operands[2]);
  const std::vector<C> mean = Values<T>(*operands[3]);
  const std::vector<C> var = Values<T>(*operands[4]);
  const C epsilon = Rd::R(epsilon_value);
  std::vector<C> true_scale(layout.features), true_shift(layout.features);
  for (int64_t j = 0; j < layout.features; ++j) {
    true_scale[j] = Rd::R(scale[j] * Rd::Rsqrt(Rd::R(var[j] + epsilon)));
    true_shift[j] = Rd::R(offset[j] - Rd::R(mean[j] * true_scale[j]));
  }
  std::vector<C> out(layout.count);
  for (int64_t i = 0; i < layout.count; ++i) {
    const int64_t j = layout.feature(i);
    out[i] = Rd::R(Rd::R(x[i] * true_scale[j]) + true_shift[j]);
  }
  return Store<T>(instruction.shape(), out);
}

template <typename T>
StatusOr<Literal> Grad(const HloInstruction& instruction, std::span<const Literal* const> operands,
                       const FeatureLayout& layout, double epsilon_value) {
  using C = ComputeType<T>;
  using Rd = Rounding<T>;
  const std::vector<C> x = Values<T>(*operands[0]);
  const std::vector<C> scale = Values<T>(*operands[1]);
  const std::vector<C> mean = Values<T>(*operands[2]);
  const std::vector<C> var = Values<T>(*operands[3]);
  const std::vector<C> dy = Values<T>(*operands[4]);
  const int64_t f = layout.features;
  const C n = Rd::R(static_cast<double>(layout.count / f));
  const C epsilon = Rd::R(epsilon_value);
  std::vector<double> sum_dy(f, 0), sum_dy_centered(f, 0);
  std::vector<C> centered(layout.count);
  for (int64_t i = 0; i < layout.count; ++i) {
    const int64_t j = layout.feature(i);
    centered[i] = Rd::R(x[i] - mean[j]);
    sum_dy[j] += dy[i];
    sum_dy_centered[j] += Rd::R(dy[i] * centered[i]);
  }
  std::vector<C> var_eps(f), rsqrt(f), grad_offset(f), g(f), grad_scale(f), factor(f);
  for (int64_t j = 0; j < f; ++j) {
    var_eps[j] = Rd::R(var[j] + epsilon);
    rsqrt[j] = Rd::Rsqrt(var_eps[j]);
    grad_offset[j] = Rd::R(sum_dy[j]);
    g[j] = Rd::R(sum_dy_centered[j]);
    grad_scale[j] = Rd::R(g[j] * rsqrt[j]);
    factor[j] = Rd::R(Rd::R(scale[j] * rsqrt[j]) / n);
  }
  std::vector<C> grad_x(layout.count);
  for (int64_t i = 0; i < layout.count; ++i) {
    const int64_t j = layout.feature(i);
    const C i1 = Rd::R(dy[i] * n);
    const C i5 = Rd::R(Rd::R(g[j] * centered[i]) / var_eps[j]);
    const C i6 = Rd::R(Rd::R(i1 - grad_offset[j]) - i5);
    grad_x[i] = Rd::R(factor[j] * i6);
  }
  return StoreTriple<T>(instruction.shape(), grad_x, grad_scale, grad_offset);
}

template <typename T>
StatusOr<Literal> Dispatch(const HloInstruction& instruction,
                           std::span<const Literal* const> operands, const FeatureLayout& layout,
                           double epsilon) {
  switch (instruction.opcode()) {
    case HloOpcode::kBatchNormTraining:
      return Training<T>(instruction, operands, layout, epsilon);
    case HloOpcode::kBatchNormInference:
      return Inference<T>(instruction, operands, layout, epsilon);
    default:
      return Grad<T>(instruction, operands, layout, epsilon);
  }
}

}  // namespace

StatusOr<Literal> HandleBatchNorm(const HloInstruction& instruction,
                                  std::span<const Literal* const> operands) {
  ASSIGN_OR_RETURN(BatchNormAttributes attributes, GetBatchNormAttributes(instruction));
  const HloOpcode opcode = instruction.opcode();
  const Shape& in_shape = operands[0]->shape();
  const PrimitiveType type = in_shape.element_type();
  const int64_t rank = in_shape.rank();
  if (!in_shape.IsArray() || attributes.feature_index < 0 || attributes.feature_index >= rank) {
    return Error(fmt::format("{} with feature_index={} of {}", HloOpcodeString(opcode),
                             attributes.feature_index, in_shape.ToString(false)));
  }
  FeatureLayout layout;
  layout.features = in_shape.dimensions(attributes.feature_index);
  layout.count = operands[0]->element_count();
  for (int64_t d = attributes.feature_index + 1; d < rank; ++d) {
    layout.inner *= in_shape.dimensions(d);
  }
  // Operands past the first are per-feature vectors, except batch-norm-grad's output gradient.
  const std::vector<int64_t> feature_dims = {layout.features};
  for (size_t i = 1; i < operands.size(); ++i) {
    const bool whole = opcode == HloOpcode::kBatchNormGrad && i == 4;
    const Shape& shape = operands[i]->shape();
    RETURN_IF_ERROR(ExpectDimensions(
        shape,
        whole ? std::span<const int64_t>(in_shape.dimensions()) : std::span<const int64_t>(feature_dims),
        fmt::format("{} operand {}", HloOpcodeString(opcode), i)));
    if (shape.element_type() != type) {
      return Error(fmt::format("{} operand {} is {}, not {}", HloOpcodeString(opcode), i,
                               shape.ToString(false), PrimitiveTypeName(type)));
    }
  }
  const Shape& shape = instruction.shape();
  const Shape& first = opcode == HloOpcode::kBatchNormInference ? shape
                       : shape.IsTuple() && shape.tuple_shapes_size() == 3 ? shape.tuple_shapes(0)
                                                                           : Shape();
  RETURN_IF_ERROR(ExpectDimensions(first, in_shape.dimensions(),
                                   fmt::format("the {} result", HloOpcodeString(opcode))));
  if (first.element_type() != type) {
    return Error(fmt::format("{} of {} into {}", HloOpcodeString(opcode),
                             in_shape.ToString(false), shape.ToString(false)));
  }
  if (opcode != HloOpcode::kBatchNormInference) {
    for (int64_t i = 1; i < 3; ++i) {
      RETURN_IF_ERROR(ExpectDimensions(shape.tuple_shapes(i), feature_dims,
                                       fmt::format("{} result {}", HloOpcodeString(opcode), i)));
      if (shape.tuple_shapes(i).element_type() != type) {
        return Error(fmt::format("{} of {} into {}", HloOpcodeString(opcode),
                                 in_shape.ToString(false), shape.ToString(false)));
      }
    }
  }
  // No features: empty results. (No elements per feature but some features: N = 0 and the
  // statistics are 0/0 = NaN, as the expansion computes them.)
  if (layout.features == 0) {
    if (opcode == HloOpcode::kBatchNormInference) return Literal(shape);
    std::vector<Literal> empty;
    for (const Shape& s : shape.tuple_shapes()) empty.emplace_back(s);
    return Literal::MakeTuple(std::move(empty));
  }
  switch (type) {
    case PrimitiveType::F16:
      return Dispatch<half>(instruction, operands, layout, attributes.epsilon);
    case PrimitiveType::BF16:
      return Dispatch<bfloat16>(instruction, operands, layout, attributes.epsilon);
    case PrimitiveType::F32:
      return Dispatch<float>(instruction, operands, layout, attributes.epsilon);
    case PrimitiveType::F64:
      return Dispatch<double>(instruction, operands, layout, attributes.epsilon);
    default:
      return Error(fmt::format("{} of {}", HloOpcodeString(opcode), in_shape.ToString(false)));
  }
}

}  // namespace xlens::evaluator_internal
