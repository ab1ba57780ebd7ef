#include "compiler/passes/bitcast_dtypes_expander.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

PrimitiveType UnsignedOfWidth(int bits) {
  switch (bits) {
    case 8: return PrimitiveType::U8;
    case 16: return PrimitiveType::U16;
    case 32: return PrimitiveType::U32;
    case 64: return PrimitiveType::U64;
    default: return PrimitiveType::PRIMITIVE_TYPE_INVALID;
  }
}

bool Expandable(PrimitiveType type) {
  return type != PrimitiveType::PRED && !IsComplexType(type) &&
         UnsignedOfWidth(BitWidth(type)) != PrimitiveType::PRIMITIVE_TYPE_INVALID;
}

class Expansion {
 public:
  Expansion(HloComputation* computation, HloInstruction* bitcast)
      : computation_(computation), bitcast_(bitcast),
        with_layout_(bitcast->shape().has_layout()) {}

  HloInstruction* Expand() {
    HloInstruction* operand = bitcast_->operand(0);
    const PrimitiveType from = operand->shape().element_type();
    const PrimitiveType to = bitcast_->shape().element_type();
    const int from_bits = BitWidth(from), to_bits = BitWidth(to);
    const PrimitiveType from_unsigned = UnsignedOfWidth(from_bits);
    const PrimitiveType to_unsigned = UnsignedOfWidth(to_bits);
    HloInstruction* bits = Same(operand, from_unsigned);
    HloInstruction* result;
    if (from_bits < to_bits) {
      const std::vector<int64_t>& in = operand->shape().dimensions();
      const int64_t k = to_bits / from_bits;
      const std::vector<int64_t> out(in.begin(), in.end() - 1);
      result = nullptr;
      for (int64_t i = 0; i < k; ++i) {
        std::vector<int64_t> starts(in.size(), 0), limits = in;
        starts.back() = i;
        limits.back() = i + 1;
        HloInstruction* piece = Unary(HloOpcode::kReshape,
                                      MakeShape(from_unsigned, out),
                                      Slice(bits, starts, limits));
        piece = Unary(HloOpcode::kConvert, MakeShape(to_unsigned, out), piece);
        if (i > 0) piece = Binary(HloOpcode::kShiftLeft, piece, Splat(to_unsigned, out, i * from_bits));
        result = result == nullptr ? piece : Binary(HloOpcode::kOr, result, piece);
      }
    } else {
      const std::vector<int64_t>& in = operand->shape().dimensions();
      const int64_t k = from_bits / to_bits;
      std::vector<int64_t> out = in;
      out.push_back(k);
      std::vector<int64_t> kept;
      for (size_t d = 0; d < in.size(); ++d) kept.push_back(static_cast<int64_t>(d));
      HloInstruction* wide = Add(CreateBroadcast(MakeShape(from_unsigned, out), bits, kept));
      auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, MakeShape(from_unsigned, out));
      iota->iota_dimension_attr = static_cast<int64_t>(in.size());
      HloInstruction* shift = Binary(HloOpcode::kMultiply, Add(std::move(iota)),
                                     Splat(from_unsigned, out, to_bits));
      wide = Binary(HloOpcode::kShiftRightLogical, wide, shift);
      result = Unary(HloOpcode::kConvert, MakeShape(to_unsigned, out), wide);
    }
    return Same(result, to);
  }

 private:
  Shape MakeShape(PrimitiveType type, std::vector<int64_t> dims) const {
    Shape shape(type, std::move(dims));
    if (with_layout_) shape.SetDefaultLayout();
    return shape;
  }
  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction) {
    instruction->metadata = bitcast_->metadata;
    return computation_->AddInstruction(std::move(instruction));
  }
  HloInstruction* Unary(HloOpcode opcode, Shape shape, HloInstruction* operand) {
    return Add(HloInstruction::CreateUnary(opcode, std::move(shape), operand));
  }
  HloInstruction* Binary(HloOpcode opcode, HloInstruction* lhs, HloInstruction* rhs) {
    return Add(HloInstruction::CreateBinary(opcode, lhs->shape(), lhs, rhs));
  }
  // A same-width bitcast to `type`, or `v` itself when it has that type.
  HloInstruction* Same(HloInstruction* v, PrimitiveType type) {
    if (v->shape().element_type() == type) return v;
    return Unary(HloOpcode::kBitcastConvert, MakeShape(type, v->shape().dimensions()), v);
  }
  HloInstruction* Splat(PrimitiveType type, const std::vector<int64_t>& dims, int64_t value) {
    HloInstruction* scalar = Add(CreateScalarConstant(MakeShape(type, {}), static_cast<double>(value)));
    return Add(CreateBroadcast(MakeShape(type, dims), scalar, {}));
  }
  HloInstruction* Slice(HloInstruction* v, std::vector<int64_t> starts, std::vector<int64_t> limits) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < starts.size(); ++d) dims.push_back(limits[d] - starts[d]);
    auto slice = HloInstruction::CreateUnary(HloOpcode::kSlice,
                                             MakeShape(v->shape().element_type(), dims), v);
    slice->has_slice = true;
    slice->slice_starts = std::move(starts);
    slice->slice_limits = std::move(limits);
    slice->slice_strides.assign(dims.size(), 1);
    return Add(std::move(slice));
  }

  HloComputation* computation_;
  HloInstruction* bitcast_;
  bool with_layout_;
};

}  // namespace

StatusOr<bool> BitcastDtypesExpander::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() != HloOpcode::kBitcastConvert ||
          instruction->operand_count() != 1) {
        continue;
      }
      const Shape& in = instruction->operand(0)->shape();
      const Shape& out = instruction->shape();
      if (!in.IsArray() || !out.IsArray() || !in.is_static() || !out.is_static() ||
          !Expandable(in.element_type()) || !Expandable(out.element_type())) {
        continue;
      }
      const int from_bits = BitWidth(in.element_type()), to_bits = BitWidth(out.element_type());
      if (from_bits == to_bits) continue;
      // The shapes XLA requires: the narrow side has one more dimension, of the width ratio.
      const Shape& narrow = from_bits < to_bits ? in : out;
      const Shape& wide = from_bits < to_bits ? out : in;
      const int64_t ratio = from_bits < to_bits ? to_bits / from_bits : from_bits / to_bits;
      std::vector<int64_t> expected = wide.dimensions();
      expected.push_back(ratio);
      if (narrow.dimensions() != expected) continue;
      Expansion expansion(computation, instruction);
      HloInstruction* replacement = expansion.Expand();
      const std::string name = instruction->name();
      RETURN_IF_ERROR(computation->ReplaceInstruction(instruction, replacement).WithContext(name));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
