#include "compiler/passes/algebraic_simplifier.h"

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "compiler/passes/dce.h"
#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

bool IsIntegerArray(const Shape& shape) {
  return shape.IsArray() && IsIntegralType(shape.element_type());
}

// Floats the evaluator computes with (F8 and smaller are held only as text).
bool IsFloatArray(const Shape& shape) {
  return shape.IsArray() && IsFloatingPointType(shape.element_type()) &&
         !IsF8OrSmallerFloat(shape.element_type());
}

// The constant `instruction` is, or broadcasts; nullptr when it is neither.
const Literal* ConstantValue(const HloInstruction* instruction) {
  while (instruction->opcode() == HloOpcode::kBroadcast) instruction = instruction->operand(0);
  if (instruction->opcode() != HloOpcode::kConstant || !instruction->has_literal()) return nullptr;
  const Literal& literal = instruction->literal();
  if (literal.is_elided() || literal.is_text_only() || !literal.shape().IsArray() ||
      !IsEvaluatorSupportedType(literal.shape().element_type())) {
    return nullptr;
  }
  return &literal;
}

bool AllElements(const HloInstruction* instruction,
                 const std::function<bool(const Literal&, int64_t)>& predicate) {
  const Literal* literal = ConstantValue(instruction);
  if (literal == nullptr) return false;
  for (int64_t i = 0; i < literal->element_count(); ++i) {
    if (!predicate(*literal, i)) return false;
  }
  return true;
}

bool IsIntValue(const HloInstruction* instruction, int64_t value) {
  if (!IsIntegerArray(instruction->shape()) && instruction->shape().element_type() != PrimitiveType::PRED) {
    return false;
  }
  return AllElements(instruction, [&](const Literal& l, int64_t i) { return l.GetAsInt64(i) == value; });
}

bool IsFloatValue(const HloInstruction* instruction, double value, bool negative_zero = false) {
  if (!IsFloatArray(instruction->shape())) return false;
  return AllElements(instruction, [&](const Literal& l, int64_t i) {
    const double v = l.GetAsDouble(i);
    return v == value && std::signbit(v) == negative_zero;
  });
}

// The one value every element of `instruction` holds, where it is a float constant (or a
// broadcast of one) whose elements are all that value, bit for bit; not a NaN.
std::optional<double> UniformFloatConstant(const HloInstruction* instruction) {
  if (!IsFloatArray(instruction->shape())) return std::nullopt;
  const Literal* literal = ConstantValue(instruction);
  if (literal == nullptr || literal->element_count() == 0) return std::nullopt;
  const double value = literal->GetAsDouble(0);
  if (std::isnan(value)) return std::nullopt;
  for (int64_t i = 1; i < literal->element_count(); ++i) {
    const double v = literal->GetAsDouble(i);
    if (v != value || std::signbit(v) != std::signbit(value)) return std::nullopt;
  }
  return value;
}

// A value that is one of two constants by a predicate (a select between uniform constants), or
// one constant throughout (`predicate` null, both values the same).
struct ConstantChoice {
  HloInstruction* predicate = nullptr;
  double on_true = 0, on_false = 0;
};

std::optional<ConstantChoice> AsConstantChoice(const HloInstruction* instruction) {
  if (std::optional<double> value = UniformFloatConstant(instruction)) {
    return ConstantChoice{nullptr, *value, *value};
  }
  if (instruction->opcode() != HloOpcode::kSelect || instruction->operand_count() != 3) {
    return std::nullopt;
  }
  std::optional<double> on_true = UniformFloatConstant(instruction->operand(1));
  std::optional<double> on_false = UniformFloatConstant(instruction->operand(2));
  if (!on_true || !on_false) return std::nullopt;
  return ConstantChoice{instruction->operand(0), *on_true, *on_false};
}

// a / b as a divide of `type` computes it, or nullopt for a NaN (whose sign and payload the
// hardware and the evaluator may not agree on). F32 divides in float; F64 in double; F16 and
// BF16 in double, rounded to the type where the constant is made (SetFromDouble): a double holds
// more than 2p + 2 bits of a quotient of p-bit values, so that rounding gives the correctly
// rounded quotient, as the divide does.
std::optional<double> FloatQuotient(PrimitiveType type, double a, double b) {
  const double q = type == PrimitiveType::F32
                       ? static_cast<double>(static_cast<float>(a) / static_cast<float>(b))
                       : a / b;
  if (std::isnan(q)) return std::nullopt;
  return q;
}

// Zero that leaves every addend unchanged: integer 0, or float -0.0 (+0.0 + -0.0 is +0.0).
bool IsAdditiveIdentity(const HloInstruction* instruction) {
  return IsIntegerArray(instruction->shape()) ? IsIntValue(instruction, 0)
                                              : IsFloatValue(instruction, 0.0, true);
}

bool IsOne(const HloInstruction* instruction) {
  return IsIntegerArray(instruction->shape()) ? IsIntValue(instruction, 1)
                                              : IsFloatValue(instruction, 1.0);
}

// Bits of magnitude a type holds exactly: the significand for floats, the value bits for integers.
int ExactBits(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::F16: return 11;
    case PrimitiveType::BF16: return 8;
    case PrimitiveType::F32: return 24;
    case PrimitiveType::F64: return 53;
    default: return IsSignedIntegralType(type) ? BitWidth(type) - 1 : BitWidth(type);
  }
}

// Whether converting from `from` to `to` keeps every value exactly (so a later convert sees the
// same number).
bool IsLosslessConvert(PrimitiveType from, PrimitiveType to) {
  if (from == to) return true;
  if (!IsEvaluatorSupportedType(from) || !IsEvaluatorSupportedType(to)) return false;
  if (IsComplexType(from) || IsComplexType(to)) {
    return from == PrimitiveType::C64 && to == PrimitiveType::C128;
  }
  if (from == PrimitiveType::PRED) return to != PrimitiveType::PRED;
  if (to == PrimitiveType::PRED) return false;
  const bool from_float = IsFloatingPointType(from), to_float = IsFloatingPointType(to);
  if (from_float && !to_float) return false;
  if (IsF8OrSmallerFloat(to)) return false;  // 8 bits: ExactBits' bit width overstates them
  if (from_float && to_float) {
    // The exponent range must grow too: bf16 has f32's range, f16 a smaller one.
    if (to == PrimitiveType::F16 || (to == PrimitiveType::BF16 && from != PrimitiveType::BF16)) {
      return false;
    }
    return ExactBits(from) <= ExactBits(to);
  }
  if (to_float) return ExactBits(from) <= ExactBits(to);
  // Integer to integer.
  if (IsSignedIntegralType(from) && IsUnsignedIntegralType(to)) return false;
  return ExactBits(from) <= ExactBits(to);
}

// Layouts agree wherever both shapes have one (array leaves; tuples element by element).
bool LayoutsAgree(const Shape& a, const Shape& b) {
  if (a.IsTuple() != b.IsTuple()) return false;
  if (a.IsTuple()) {
    if (a.tuple_shapes_size() != b.tuple_shapes_size()) return false;
    for (int64_t i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!LayoutsAgree(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  return !a.has_layout() || !b.has_layout() || a.layout() == b.layout();
}

bool IsIdentityPermutation(const std::vector<int64_t>& permutation) {
  for (size_t i = 0; i < permutation.size(); ++i) {
    if (permutation[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// The opcode of a reducer that is `op(param0, param1)` on scalars of `type`; nullopt otherwise.
std::optional<HloOpcode> SimpleReducerOpcode(const HloComputation* reducer, PrimitiveType type) {
  if (reducer == nullptr || reducer->num_parameters() != 2) return std::nullopt;
  const HloInstruction* root = reducer->root_instruction();
  if (root == nullptr || root->operand_count() != 2 || !root->shape().IsArray() ||
      root->shape().rank() != 0 || root->shape().element_type() != type) {
    return std::nullopt;
  }
  const HloInstruction* p0 = reducer->parameter_instruction(0);
  const HloInstruction* p1 = reducer->parameter_instruction(1);
  if (p0 == nullptr || p1 == nullptr) return std::nullopt;
  const bool straight = root->operand(0) == p0 && root->operand(1) == p1;
  const bool swapped = root->operand(0) == p1 && root->operand(1) == p0;
  if (!straight && !swapped) return std::nullopt;
  switch (root->opcode()) {
    case HloOpcode::kAdd: case HloOpcode::kMultiply: case HloOpcode::kMaximum:
    case HloOpcode::kMinimum: case HloOpcode::kAnd: case HloOpcode::kOr:
      // Commutative, so the operand order of the reducer does not matter.
      return root->opcode();
    default:
      return std::nullopt;
  }
}

// Whether the scalar `init` leaves every value unchanged under `op` (bit for bit).
bool IsReducerIdentity(HloOpcode op, const HloInstruction* init) {
  const Shape& shape = init->shape();
  const PrimitiveType type = shape.element_type();
  const bool is_signed = IsSignedIntegralType(type);
  const int bits = BitWidth(type);
  switch (op) {
    case HloOpcode::kAdd:
      return IsAdditiveIdentity(init);
    case HloOpcode::kMultiply:
      return IsOne(init);
    case HloOpcode::kMaximum:
      if (IsFloatArray(shape)) return IsFloatValue(init, -std::numeric_limits<double>::infinity(), true);
      if (!IsIntegerArray(shape) || bits > 63) return false;
      return IsIntValue(init, is_signed ? -(int64_t{1} << (bits - 1)) : 0);
    case HloOpcode::kMinimum:
      if (IsFloatArray(shape)) return IsFloatValue(init, std::numeric_limits<double>::infinity());
      if (!IsIntegerArray(shape) || bits > 63) return false;
      return IsIntValue(init, is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1);
    case HloOpcode::kAnd:
      return type == PrimitiveType::PRED && IsIntValue(init, 1);
    case HloOpcode::kOr:
      return type == PrimitiveType::PRED && IsIntValue(init, 0);
    default:
      return false;
  }
}

class Simplifier {
 public:
  explicit Simplifier(HloComputation* computation) : computation_(computation) {}

  // One sweep over the computation in post order; true when anything was rewritten.
  StatusOr<bool> Sweep() {
    bool changed = false;
    for (HloInstruction* instruction : computation_->MakeInstructionPostOrder()) {
      if (removed_.contains(instruction)) continue;
      if (!instruction->control_predecessors().empty() ||
          !instruction->control_successors().empty() || HasSideEffect(*instruction)) {
        continue;
      }
      ASSIGN_OR_RETURN(bool rewritten, Visit(instruction));
      changed |= rewritten;
    }
    RETURN_IF_ERROR(RemoveDead());
    return changed;
  }

 private:
  StatusOr<bool> Visit(HloInstruction* instruction) {
    switch (instruction->opcode()) {
      case HloOpcode::kAdd: return HandleAdd(instruction);
      case HloOpcode::kSubtract: return HandleSubtract(instruction);
      case HloOpcode::kMultiply: return HandleMultiply(instruction);
      case HloOpcode::kDivide: return HandleDivide(instruction);
      case HloOpcode::kNegate: return HandleNegate(instruction);
      case HloOpcode::kReshape: return HandleReshape(instruction);
      case HloOpcode::kTranspose: return HandleTranspose(instruction);
      case HloOpcode::kBroadcast: return HandleBroadcast(instruction);
      case HloOpcode::kConvert: return HandleConvert(instruction);
      case HloOpcode::kSlice: return HandleSlice(instruction);
      case HloOpcode::kPad: return HandlePad(instruction);
      case HloOpcode::kConcatenate:
        return instruction->operand_count() == 1 && Replace(instruction, instruction->operand(0));
      case HloOpcode::kCopy: return HandleCopy(instruction);
      case HloOpcode::kReduce: return HandleReduce(instruction);
      case HloOpcode::kDot: return HandleDot(instruction);
      case HloOpcode::kCompare: return HandleCompare(instruction);
      case HloOpcode::kSelect: return HandleSelect(instruction);
      default: return false;
    }
  }

  // Adds `instruction` with the metadata of `origin`, the instruction it helps replace.
  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction, const HloInstruction* origin) {
    instruction->metadata = origin->metadata;
    HloInstruction* added = computation_->AddInstruction(std::move(instruction));
    created_.insert(added);
    return added;
  }

  HloInstruction* AddUnary(HloOpcode opcode, Shape shape, HloInstruction* operand,
                           const HloInstruction* origin,
                           std::optional<std::vector<int64_t>> dimensions = std::nullopt) {
    auto instruction = HloInstruction::CreateUnary(opcode, std::move(shape), operand);
    instruction->dimensions_attr = std::move(dimensions);
    return Add(std::move(instruction), origin);
  }

  // Replaces every use of `old` by `replacement` when the shapes agree (layouts included where
  // both have one), then removes `old`. Its operands are removed later if that left them dead.
  bool Replace(HloInstruction* old, HloInstruction* replacement) {
    if (old == replacement || !shape_util::Compatible(old->shape(), replacement->shape()) ||
        !LayoutsAgree(old->shape(), replacement->shape())) {
      // What was built for the rewrite goes again, so a refused rewrite changes nothing.
      if (created_.contains(replacement)) maybe_dead_.push_back(replacement);
      return false;
    }
    for (HloInstruction* operand : old->operands()) maybe_dead_.push_back(operand);
    old->ReplaceAllUsesWith(replacement);
    maybe_dead_.push_back(old);
    return true;
  }

  // Removes what the rewrites left without users (never parameters, roots or side effects).
  Status RemoveDead() {
    while (!maybe_dead_.empty()) {
      HloInstruction* instruction = maybe_dead_.back();
      maybe_dead_.pop_back();
      if (removed_.contains(instruction) || instruction->user_count() != 0 ||
          instruction->IsRoot() || instruction->opcode() == HloOpcode::kParameter ||
          HasSideEffect(*instruction) || !instruction->control_successors().empty() ||
          !instruction->control_predecessors().empty()) {
        continue;
      }
      for (HloInstruction* operand : instruction->operands()) maybe_dead_.push_back(operand);
      RETURN_IF_ERROR(computation_->RemoveInstruction(instruction));
      removed_.insert(instruction);
    }
    return OkStatus();
  }

  bool HandleAdd(HloInstruction* add) {
    HloInstruction* lhs = add->operand(0);
    HloInstruction* rhs = add->operand(1);
    if (IsAdditiveIdentity(rhs)) return Replace(add, lhs);
    if (IsAdditiveIdentity(lhs)) return Replace(add, rhs);
    return false;
  }

  bool HandleSubtract(HloInstruction* sub) {
    // x - (+0.0) is x for every float x, including -0.0.
    HloInstruction* rhs = sub->operand(1);
    const bool zero = IsIntegerArray(rhs->shape()) ? IsIntValue(rhs, 0) : IsFloatValue(rhs, 0.0);
    return zero && Replace(sub, sub->operand(0));
  }

  bool HandleMultiply(HloInstruction* mul) {
    HloInstruction* lhs = mul->operand(0);
    HloInstruction* rhs = mul->operand(1);
    if (IsOne(rhs)) return Replace(mul, lhs);
    if (IsOne(lhs)) return Replace(mul, rhs);
    if (IsIntegerArray(mul->shape())) {
      if (IsIntValue(rhs, 0)) return Replace(mul, rhs);
      if (IsIntValue(lhs, 0)) return Replace(mul, lhs);
    }
    return false;
  }

  bool HandleDivide(HloInstruction* div) {
    if (IsOne(div->operand(1))) return Replace(div, div->operand(0));
    return FoldDivideOfConstantChoices(div);
  }

  // a / b where a and b are each a select between two constants or a constant, one of them at
  // least a select: the quotients fold and the divide becomes selects between them, nested where
  // both are selects on different predicates. JAX's gradient of maximum (and minimum) splits it
  // between tied operands as select(x == max, 1, 0) / select(y == max, 2, 1): a training step's
  // ReLU gradients divide every element so, a vector divide each 16 elements that two blends
  // replace. Bit for bit what the divide gives; left alone where a quotient is a NaN.
  bool FoldDivideOfConstantChoices(HloInstruction* div) {
    std::optional<ConstantChoice> a = AsConstantChoice(div->operand(0));
    std::optional<ConstantChoice> b = AsConstantChoice(div->operand(1));
    if (!a || !b || (a->predicate == nullptr && b->predicate == nullptr)) return false;
    const Shape& shape = div->shape();
    const PrimitiveType type = shape.element_type();
    // quotients[i][j]: a's value i (0 where its predicate holds) over b's value j, each that the
    // result can take: a constant's second value is its first, and on one predicate a's value i
    // meets only b's value i.
    const bool same_predicate = a->predicate == b->predicate;
    double quotients[2][2] = {};
    const double as[2] = {a->on_true, a->on_false}, bs[2] = {b->on_true, b->on_false};
    for (int i = 0; i < (a->predicate ? 2 : 1); ++i) {
      for (int j = 0; j < (b->predicate ? 2 : 1); ++j) {
        if (same_predicate && i != j) continue;
        std::optional<double> q = FloatQuotient(type, as[i], bs[j]);
        if (!q) return false;
        quotients[i][j] = *q;
      }
    }
    // The value over b's value j: a's quotients chosen by a's predicate.
    auto over = [&](int j) {
      if (a->predicate == nullptr) return UniformConstant(quotients[0][j], shape, div);
      HloInstruction* on_true = UniformConstant(quotients[0][j], shape, div);
      HloInstruction* on_false = UniformConstant(quotients[1][j], shape, div);
      return SelectBetween(a->predicate, on_true, on_false, div);
    };
    if (b->predicate == nullptr) return Replace(div, over(0));
    if (same_predicate) {
      HloInstruction* on_true = UniformConstant(quotients[0][0], shape, div);
      HloInstruction* on_false = UniformConstant(quotients[1][1], shape, div);
      return Replace(div, SelectBetween(a->predicate, on_true, on_false, div));
    }
    HloInstruction* over_true = over(0);
    HloInstruction* over_false = over(1);
    return Replace(div, SelectBetween(b->predicate, over_true, over_false, div));
  }

  // `value` in every element of `shape` (of a float type): a scalar constant, broadcast.
  HloInstruction* UniformConstant(double value, const Shape& shape, const HloInstruction* origin) {
    HloInstruction* scalar = Add(CreateScalarConstant(ScalarLike(shape.element_type(), shape), value), origin);
    if (shape.rank() == 0) return scalar;
    return AddUnary(HloOpcode::kBroadcast, shape, scalar, origin, std::vector<int64_t>{});
  }

  HloInstruction* SelectBetween(HloInstruction* predicate, HloInstruction* on_true,
                                HloInstruction* on_false, const HloInstruction* origin) {
    return Add(CreateSelect(predicate, on_true, on_false), origin);
  }

  bool HandleNegate(HloInstruction* negate) {
    HloInstruction* operand = negate->operand(0);
    return operand->opcode() == HloOpcode::kNegate && Replace(negate, operand->operand(0));
  }

  bool HandleReshape(HloInstruction* reshape) {
    HloInstruction* operand = reshape->operand(0);
    if (!reshape->shape().IsArray() || !operand->shape().IsArray()) return false;
    if (shape_util::Compatible(reshape->shape(), operand->shape())) return Replace(reshape, operand);
    if (operand->opcode() == HloOpcode::kReshape) {
      return Replace(reshape, AddUnary(HloOpcode::kReshape, reshape->shape(), operand->operand(0),
                                       reshape));
    }
    if (operand->opcode() == HloOpcode::kBroadcast && operand->operand(0)->shape().IsArray() &&
        operand->operand(0)->shape().rank() == 0) {
      return Replace(reshape, AddUnary(HloOpcode::kBroadcast, reshape->shape(),
                                       operand->operand(0), reshape, std::vector<int64_t>{}));
    }
    return false;
  }

  bool HandleTranspose(HloInstruction* transpose) {
    HloInstruction* operand = transpose->operand(0);
    const std::vector<int64_t>& outer = transpose->dimensions();
    if (IsIdentityPermutation(outer)) return Replace(transpose, operand);
    if (operand->opcode() != HloOpcode::kTranspose) return false;
    // out dim i = operand dim outer[i] = source dim inner[outer[i]].
    const std::vector<int64_t>& inner = operand->dimensions();
    if (inner.size() != outer.size()) return false;
    std::vector<int64_t> combined(outer.size());
    for (size_t i = 0; i < outer.size(); ++i) combined[i] = inner[outer[i]];
    HloInstruction* source = operand->operand(0);
    if (IsIdentityPermutation(combined)) return Replace(transpose, source);
    return Replace(transpose, AddUnary(HloOpcode::kTranspose, transpose->shape(), source, transpose,
                                       std::move(combined)));
  }

  bool HandleBroadcast(HloInstruction* broadcast) {
    HloInstruction* operand = broadcast->operand(0);
    const std::vector<int64_t>& outer = broadcast->dimensions();
    if (shape_util::Compatible(broadcast->shape(), operand->shape()) &&
        IsIdentityPermutation(outer)) {
      return Replace(broadcast, operand);
    }
    if (operand->opcode() != HloOpcode::kBroadcast) return false;
    // Source dim i lands in operand dim inner[i], which lands in output dim outer[inner[i]].
    const std::vector<int64_t>& inner = operand->dimensions();
    std::vector<int64_t> combined;
    for (int64_t d : inner) {
      if (d < 0 || d >= static_cast<int64_t>(outer.size())) return false;
      combined.push_back(outer[d]);
    }
    return Replace(broadcast, AddUnary(HloOpcode::kBroadcast, broadcast->shape(),
                                       operand->operand(0), broadcast, std::move(combined)));
  }

  bool HandleConvert(HloInstruction* convert) {
    HloInstruction* operand = convert->operand(0);
    const PrimitiveType to = convert->shape().element_type();
    if (operand->shape().element_type() == to) return Replace(convert, operand);
    if (operand->opcode() != HloOpcode::kConvert) return false;
    HloInstruction* source = operand->operand(0);
    if (!IsLosslessConvert(source->shape().element_type(), operand->shape().element_type())) {
      return false;
    }
    if (source->shape().element_type() == to) return Replace(convert, source);
    return Replace(convert, AddUnary(HloOpcode::kConvert, convert->shape(), source, convert));
  }

  bool HandleSlice(HloInstruction* slice) {
    HloInstruction* operand = slice->operand(0);
    if (!slice->has_slice || !operand->shape().IsArray()) return false;
    for (int64_t d = 0; d < operand->shape().rank(); ++d) {
      if (static_cast<size_t>(d) >= slice->slice_starts.size() || slice->slice_starts[d] != 0 ||
          slice->slice_limits[d] != operand->shape().dimensions(d) ||
          (d < static_cast<int64_t>(slice->slice_strides.size()) && slice->slice_strides[d] != 1)) {
        return false;
      }
    }
    return Replace(slice, operand);
  }

  bool HandlePad(HloInstruction* pad) {
    if (!pad->padding_config) return false;
    for (const PaddingDimension& d : pad->padding_config->dimensions) {
      if (d.edge_padding_low != 0 || d.edge_padding_high != 0 || d.interior_padding != 0) {
        return false;
      }
    }
    return Replace(pad, pad->operand(0));
  }

  bool HandleCopy(HloInstruction* copy) {
    // A copy that changes the layout is a real transposition of memory; only an exact one goes.
    const Shape& in = copy->operand(0)->shape();
    const Shape& out = copy->shape();
    return in.has_layout() == out.has_layout() && in == out && Replace(copy, copy->operand(0));
  }

  bool HandleReduce(HloInstruction* reduce) {
    if (reduce->operand_count() != 2 || !reduce->shape().IsArray()) return false;
    HloInstruction* input = reduce->operand(0);
    HloInstruction* init = reduce->operand(1);
    const Shape& in = input->shape();
    if (!in.IsArray() || !in.is_static()) return false;
    bool empty = false;
    bool all_unit = true;
    for (int64_t d : reduce->dimensions()) {
      if (d < 0 || d >= in.rank()) return false;
      empty |= in.dimensions(d) == 0;
      all_unit &= in.dimensions(d) == 1;
    }
    // Reducing no elements gives the init value everywhere, whatever the reducer does.
    if (empty) {
      return Replace(reduce, AddUnary(HloOpcode::kBroadcast, reduce->shape(), init, reduce,
                                      std::vector<int64_t>{}));
    }
    if (!all_unit) return false;
    std::optional<HloOpcode> op = SimpleReducerOpcode(reduce->to_apply(), in.element_type());
    if (!op) return false;
    HloInstruction* values = input;
    if (!shape_util::Compatible(in, reduce->shape())) {
      values = AddUnary(HloOpcode::kReshape, reduce->shape(), input, reduce);
    }
    if (IsReducerIdentity(*op, init)) return Replace(reduce, values);
    // One element per output: the result is reducer(init, element).
    HloInstruction* inits = AddUnary(HloOpcode::kBroadcast, reduce->shape(), init, reduce,
                                     std::vector<int64_t>{});
    return Replace(reduce, Add(HloInstruction::CreateBinary(*op, reduce->shape(), inits, values),
                               reduce));
  }

  bool HandleDot(HloInstruction* dot) {
    // An algorithm= may round the inputs (dot_bf16_bf16_f32); a multiply would not.
    if (dot->raw_attribute("algorithm") != nullptr) return false;
    HloInstruction* lhs = dot->operand(0);
    HloInstruction* rhs = dot->operand(1);
    const Shape& out = dot->shape();
    if (!lhs->shape().IsArray() || !rhs->shape().IsArray() || !out.IsArray()) return false;
    const PrimitiveType type = out.element_type();
    if (!(IsIntegralType(type) || (IsFloatingPointType(type) && !IsF8OrSmallerFloat(type))) ||
        !IsLosslessConvert(lhs->shape().element_type(), type) ||
        !IsLosslessConvert(rhs->shape().element_type(), type) ||
        lhs->shape().element_type() == PrimitiveType::PRED ||
        rhs->shape().element_type() == PrimitiveType::PRED) {
      return false;
    }
    DotDimensionNumbers dnums;
    if (dot->dot_dimension_numbers) {
      dnums = *dot->dot_dimension_numbers;
    } else if (lhs->shape().rank() <= 2 && rhs->shape().rank() <= 2) {
      if (lhs->shape().rank() >= 1) dnums.lhs_contracting_dimensions = {lhs->shape().rank() - 1};
      if (rhs->shape().rank() >= 1) dnums.rhs_contracting_dimensions = {0};
    } else {
      return false;
    }
    for (int64_t d : dnums.lhs_contracting_dimensions) {
      if (lhs->shape().dimensions(d) != 1) return false;
    }
    const int64_t batch = static_cast<int64_t>(dnums.lhs_batch_dimensions.size());
    HloInstruction* lhs_part = ToOuterOperand(dot, lhs, dnums.lhs_batch_dimensions,
                                              dnums.lhs_contracting_dimensions);
    HloInstruction* rhs_part = ToOuterOperand(dot, rhs, dnums.rhs_batch_dimensions,
                                              dnums.rhs_contracting_dimensions);
    const int64_t lhs_free = lhs_part->shape().rank() - batch;
    const int64_t rhs_free = rhs_part->shape().rank() - batch;
    std::vector<int64_t> lhs_dims(batch + lhs_free), rhs_dims(batch);
    std::iota(lhs_dims.begin(), lhs_dims.end(), 0);
    std::iota(rhs_dims.begin(), rhs_dims.end(), 0);
    for (int64_t i = 0; i < rhs_free; ++i) rhs_dims.push_back(batch + lhs_free + i);
    HloInstruction* lhs_wide = AddUnary(HloOpcode::kBroadcast, out, lhs_part, dot, lhs_dims);
    HloInstruction* rhs_wide = AddUnary(HloOpcode::kBroadcast, out, rhs_part, dot, rhs_dims);
    return Replace(dot, Add(HloInstruction::CreateBinary(HloOpcode::kMultiply, out, lhs_wide,
                                                         rhs_wide), dot));
  }

  // `operand` of `dot` as [batch..., free...] in the dot's result type: transposed so the batch
  // dimensions lead and the (size-1) contracting dimensions trail, then reshaped without them.
  HloInstruction* ToOuterOperand(HloInstruction* dot, HloInstruction* operand,
                                 const std::vector<int64_t>& batch_dims,
                                 const std::vector<int64_t>& contracting_dims) {
    const Shape& shape = operand->shape();
    std::vector<bool> used(shape.rank(), false);
    std::vector<int64_t> order = batch_dims;
    for (int64_t d : batch_dims) used[d] = true;
    for (int64_t d : contracting_dims) used[d] = true;
    std::vector<int64_t> kept_dims;
    for (int64_t d : batch_dims) kept_dims.push_back(shape.dimensions(d));
    for (int64_t d = 0; d < shape.rank(); ++d) {
      if (!used[d]) {
        order.push_back(d);
        kept_dims.push_back(shape.dimensions(d));
      }
    }
    order.insert(order.end(), contracting_dims.begin(), contracting_dims.end());
    HloInstruction* result = operand;
    if (!IsIdentityPermutation(order)) {
      std::vector<int64_t> permuted;
      for (int64_t d : order) permuted.push_back(shape.dimensions(d));
      result = AddUnary(HloOpcode::kTranspose,
                        ShapeLike(shape.element_type(), std::move(permuted), dot->shape()), result,
                        dot, order);
    }
    if (!contracting_dims.empty()) {
      result = AddUnary(HloOpcode::kReshape,
                        ShapeLike(shape.element_type(), kept_dims, dot->shape()), result, dot);
    }
    const PrimitiveType type = dot->shape().element_type();
    if (shape.element_type() != type) {
      result = AddUnary(HloOpcode::kConvert, ShapeLike(type, kept_dims, dot->shape()), result, dot);
    }
    return result;
  }

  bool HandleCompare(HloInstruction* compare) {
    HloInstruction* operand = compare->operand(0);
    if (operand != compare->operand(1) || !compare->comparison_direction) return false;
    const PrimitiveType type = operand->shape().element_type();
    // Floats are excluded: NaN compares unequal to itself.
    if (!IsIntegralType(type) && type != PrimitiveType::PRED) return false;
    const ComparisonDirection d = *compare->comparison_direction;
    const bool value = d == ComparisonDirection::kEq || d == ComparisonDirection::kLe ||
                       d == ComparisonDirection::kGe;
    const Shape& shape = compare->shape();
    HloInstruction* constant =
        Add(HloInstruction::CreateConstant(Literal::CreateR0<bool>(PrimitiveType::PRED, value)),
            compare);
    if (shape.has_layout()) constant->mutable_shape()->SetDefaultLayout();
    if (shape.rank() == 0) return Replace(compare, constant);
    return Replace(compare, AddUnary(HloOpcode::kBroadcast, shape, constant, compare,
                                     std::vector<int64_t>{}));
  }

  bool HandleSelect(HloInstruction* select) {
    if (select->operand_count() != 3) return false;
    HloInstruction* on_true = select->operand(1);
    HloInstruction* on_false = select->operand(2);
    if (on_true == on_false) return Replace(select, on_true);
    HloInstruction* predicate = select->operand(0);
    if (predicate->shape().element_type() != PrimitiveType::PRED) return false;
    if (IsIntValue(predicate, 1)) return Replace(select, on_true);
    if (IsIntValue(predicate, 0)) return Replace(select, on_false);
    return false;
  }

  HloComputation* computation_;
  std::vector<HloInstruction*> maybe_dead_;
  std::unordered_set<const HloInstruction*> created_;
  std::unordered_set<const HloInstruction*> removed_;
};

}  // namespace

StatusOr<bool> AlgebraicSimplifier::Run(HloModule& module) {
  // Bounds the sweeps of one computation; each sweep that changes something removes or shortens
  // something, so real modules settle in a few.
  constexpr int kMaxSweeps = 64;
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    Simplifier simplifier(computation);
    for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
      ASSIGN_OR_RETURN(bool swept, simplifier.Sweep());
      if (!swept) break;
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
