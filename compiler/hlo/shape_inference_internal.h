// Helpers shared by the shape inference files, and the per-concept inference entry points that
// InferShape dispatches to. Not part of the public API.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::shape_inference_internal {

// "f32[2,<=3]": shapes in messages are printed without layouts.
std::string ShapeString(const Shape& shape);
// "{0,2}"
std::string DimsString(std::span<const int64_t> dims);

// Two dimension sizes agree: equal, or either is unbounded (`?`).
bool DimsCompatible(int64_t a, int64_t b);
// Same rank and pairwise compatible sizes; element types ignored.
bool SameDimensions(const Shape& a, const Shape& b);
// Same element type and dimensions (recursively for tuples); layouts and dynamic bounds ignored.
bool ShapesCompatible(const Shape& a, const Shape& b);

// Fails unless `shape` is an array (not a tuple, token or opaque value).
Status ExpectArray(const Shape& shape, std::string_view what);
// Fails unless every value of `dims` names a distinct dimension of a `rank`-dimensional array:
// "dimensions={3} is out of range for operand of rank 2".
Status CheckDimensionList(std::span<const int64_t> dims, int64_t rank, std::string_view attribute,
                          std::string_view what);

// The computation named by `key`, or an error when the instruction does not call one.
StatusOr<const HloComputation*> CalledComputation(const HloInstruction& instruction,
                                                  const std::string& key);
// Fails unless `computation` takes exactly `parameters` (compared with ShapesCompatible).
Status CheckParameters(const HloComputation& computation, std::span<const Shape> parameters,
                       std::string_view role);
// A reducer takes N accumulators and N input values (all scalars) and returns the N new
// accumulators: a scalar when N == 1 (or a 1-tuple), else a tuple of scalars. Input parameters
// may differ from the values fed to them in float precision, as XLA allows.
Status CheckReducer(const HloComputation& reducer, const std::vector<PrimitiveType>& accumulators,
                    const std::vector<PrimitiveType>& inputs, std::string_view role);
// The shape of the computation's root, without layouts.
StatusOr<Shape> RootShape(const HloComputation& computation);

// Size of one dimension after a window is applied to it (padding, dilations, stride).
StatusOr<int64_t> WindowedDimensionSize(int64_t size, const WindowDimension& window,
                                        int64_t dimension);
// The shape produced by sliding `window` over `base` (element type kept).
StatusOr<Shape> InferWindowOutputShape(const Shape& base, const Window& window);

const Shape& OperandShape(const HloInstruction& instruction, int64_t i);
// The declared shape, for opcodes whose result cannot be derived from the operands alone:
// "result shape must be written for <opcode>" when there is none.
StatusOr<Shape> DeclaredShape(const HloInstruction& instruction);
// `shape` with another element type and no layout.
Shape WithElementType(const Shape& shape, PrimitiveType type);

// Per-concept inference; each expects the operand count already checked.
StatusOr<Shape> InferBroadcastShape(const HloInstruction& instruction);
StatusOr<Shape> InferReshapeShape(const HloInstruction& instruction);
StatusOr<Shape> InferBitcastShape(const HloInstruction& instruction);
StatusOr<Shape> InferTransposeShape(const HloInstruction& instruction);
StatusOr<Shape> InferSliceShape(const HloInstruction& instruction);
StatusOr<Shape> InferDynamicSliceShape(const HloInstruction& instruction);
StatusOr<Shape> InferDynamicUpdateSliceShape(const HloInstruction& instruction);
StatusOr<Shape> InferConcatenateShape(const HloInstruction& instruction);
StatusOr<Shape> InferPadShape(const HloInstruction& instruction);
StatusOr<Shape> InferReverseShape(const HloInstruction& instruction);
StatusOr<Shape> InferReduceShape(const HloInstruction& instruction);
StatusOr<Shape> InferReduceWindowShape(const HloInstruction& instruction);
StatusOr<Shape> InferSelectAndScatterShape(const HloInstruction& instruction);
StatusOr<Shape> InferSortShape(const HloInstruction& instruction);
StatusOr<Shape> InferMapShape(const HloInstruction& instruction);
StatusOr<Shape> InferAllReduceShape(const HloInstruction& instruction);
StatusOr<Shape> InferDotShape(const HloInstruction& instruction);
StatusOr<Shape> InferConvolutionShape(const HloInstruction& instruction);
StatusOr<Shape> InferGatherShape(const HloInstruction& instruction);
StatusOr<Shape> InferScatterShape(const HloInstruction& instruction);
// shape_inference_numeric.cc
StatusOr<Shape> InferFftShape(const HloInstruction& instruction);
StatusOr<Shape> InferTopKShape(const HloInstruction& instruction);
StatusOr<Shape> InferCholeskyShape(const HloInstruction& instruction);
// The shape of b; a and b of one floating or complex type (the evaluator checks the rest).
StatusOr<Shape> InferTriangularSolveShape(const HloInstruction& instruction);
StatusOr<Shape> InferBatchNormShape(const HloInstruction& instruction);

}  // namespace xlens::shape_inference_internal
