// Instructions that several passes build, made one way (after XLA's HloInstruction::CreateX
// factories and hlo_creation_utils). They return the instruction unowned by any computation, so
// that each pass adds it with the metadata it gives what it adds.
// Header only: a new source file of the passes library would move the files after it into other
// unity batches, where file-local names that never met before could clash.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"

namespace xlens {

// The scalar of `type` for an instruction made beside one of shape `like`: laid out (the default
// layout) when `like` is, so that a module whose shapes carry layouts keeps them on every shape.
inline Shape ScalarLike(PrimitiveType type, const Shape& like) {
  Shape shape = Shape::Scalar(type);
  if (like.has_layout()) shape.SetDefaultLayout();
  return shape;
}

// The array of `type` and `dims` for an instruction made beside one of shape `like`: laid out (the
// default layout) when `like` is, as ScalarLike.
inline Shape ShapeLike(PrimitiveType type, std::vector<int64_t> dims, const Shape& like) {
  Shape shape(type, std::move(dims));
  if (like.has_layout()) shape.SetDefaultLayout();
  return shape;
}

// A constant of the scalar shape `scalar` holding `value` (rounded to its type as
// Literal::SetFromDouble rounds).
inline std::unique_ptr<HloInstruction> CreateScalarConstant(Shape scalar, double value) {
  Literal literal(std::move(scalar));
  literal.SetFromDouble(0, value);
  return HloInstruction::CreateConstant(std::move(literal));
}

// A broadcast of `operand` to `shape`: operand dimension i becomes dimension `dimensions[i]` of
// `shape` (empty for a scalar operand), as in XLA's `broadcast(...), dimensions={...}`.
inline std::unique_ptr<HloInstruction> CreateBroadcast(Shape shape, HloInstruction* operand,
                                                       std::vector<int64_t> dimensions) {
  auto broadcast = HloInstruction::CreateUnary(HloOpcode::kBroadcast, std::move(shape), operand);
  broadcast->dimensions_attr = std::move(dimensions);
  return broadcast;
}

// select(predicate, on_true, on_false), of on_true's shape.
inline std::unique_ptr<HloInstruction> CreateSelect(HloInstruction* predicate, HloInstruction* on_true,
                                                    HloInstruction* on_false) {
  auto select = std::make_unique<HloInstruction>(HloOpcode::kSelect, on_true->shape());
  select->AppendOperand(predicate);
  select->AppendOperand(on_true);
  select->AppendOperand(on_false);
  return select;
}

}  // namespace xlens
