// What an instruction costs the evaluator, counted before it runs, so that work no one would wait
// for (a reduce-window whose window is 2^62 wide, a dot contracting 10^9 by 10^9) is refused with
// its figure instead of running for centuries.
#include <unistd.h>

#include <cmath>

#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/support/file_io.h"

namespace xlens {
namespace {

// The machine's physical memory: a result larger than this cannot be held, so it is refused with
// the figures instead of failing (or swapping) in the middle of the evaluation.
int64_t PhysicalMemoryBytes() {
  static const int64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return INT64_MAX;
    return static_cast<int64_t>(pages) * page_size;
  }();
  return bytes;
}

// Elements of every leaf array; huge shapes saturate rather than wrap (Shape::num_elements).
double LeafElements(const Shape& shape) {
  if (!shape.IsTuple()) return shape.IsArray() ? static_cast<double>(shape.num_elements()) : 0;
  double total = 0;
  for (const Shape& element : shape.tuple_shapes()) total += LeafElements(element);
  return total;
}

// Elements of the first leaf array (the first result of a variadic op).
double FirstElements(const Shape& shape) {
  const Shape* s = &shape;
  while (s->IsTuple() && s->tuple_shapes_size() > 0) s = &s->tuple_shapes(0);
  return s->IsArray() ? static_cast<double>(s->num_elements()) : 0;
}

double OperandElements(const HloInstruction& instruction, int64_t i) {
  return i < instruction.operand_count() ? FirstElements(instruction.operand(i)->shape()) : 0;
}

double WindowPositions(const HloInstruction& instruction) {
  double positions = 1;
  if (!instruction.window) return positions;
  for (const WindowDimension& d : instruction.window->dimensions) {
    positions *= static_cast<double>(std::max<int64_t>(d.size, 0));
  }
  return positions;
}

double DimSize(const Shape& shape, int64_t d) {
  return shape.IsArray() && d >= 0 && d < shape.rank()
             ? static_cast<double>(std::max<int64_t>(shape.dimensions(d), 0))
             : 1;
}

}  // namespace

double EvaluationWork(const HloInstruction& instruction) {
  const Shape& shape = instruction.shape();
  switch (instruction.opcode()) {
    case HloOpcode::kParameter:
    case HloOpcode::kCall:
    case HloOpcode::kFusion:
    case HloOpcode::kWhile:
    case HloOpcode::kConditional:
    case HloOpcode::kGetTupleElement:
    case HloOpcode::kTuple:
      return 0;
    case HloOpcode::kDot: {
      // One multiply-add per output element and contracted position.
      double width = 1;
      if (instruction.dot_dimension_numbers && instruction.operand_count() > 0) {
        for (int64_t d : instruction.dot_dimension_numbers->lhs_contracting_dimensions) {
          width *= DimSize(instruction.operand(0)->shape(), d);
        }
      }
      return FirstElements(shape) * width;
    }
    case HloOpcode::kConvolution: {
      // Per output element: every kernel position, for the input features of its group.
      if (instruction.operand_count() < 2 || !instruction.convolution_dimension_numbers) break;
      const Shape& rhs = instruction.operand(1)->shape();
      const double output_features =
          DimSize(rhs, instruction.convolution_dimension_numbers->kernel_output_feature_dimension);
      return FirstElements(shape) * OperandElements(instruction, 1) /
             std::max(output_features, 1.0);
    }
    case HloOpcode::kReduceWindow:
      // Every window position of every output element, for each of the N inputs.
      return FirstElements(shape) * WindowPositions(instruction) *
             std::max<double>(instruction.operand_count() / 2, 1);
    case HloOpcode::kSelectAndScatter:
      return OperandElements(instruction, 1) * WindowPositions(instruction);
    case HloOpcode::kReduce:
      return OperandElements(instruction, 0) * std::max<double>(instruction.operand_count() / 2, 1);
    case HloOpcode::kSort: {
      const double n = OperandElements(instruction, 0);
      const std::vector<int64_t>& dims = instruction.dimensions();
      const double length = dims.empty() || instruction.operand_count() == 0
                                ? n
                                : DimSize(instruction.operand(0)->shape(), dims[0]);
      return n * std::max(std::log2(std::max(length, 2.0)), 1.0);
    }
    case HloOpcode::kFft: {
      // A direct DFT per transformed dimension: every point of the larger side, once per
      // length (evaluator_fft.cc), each a complex multiply-add in long double, which costs
      // about four of the scalar operations the limit counts (measured: 6.7e7 of them, a
      // length-1024 transform of 64 rows, take 0.55 s).
      double lengths = 0;
      if (StatusOr<FftAttributes> fft = GetFftAttributes(instruction); fft.ok()) {
        for (int64_t length : fft->lengths) lengths += static_cast<double>(length);
      }
      return 4 * std::max(FirstElements(shape), OperandElements(instruction, 0)) *
             std::max(lengths, 1.0);
    }
    case HloOpcode::kCholesky:
      // n^3/6 multiply-adds per n x n matrix, counted as n per element.
      return FirstElements(shape) * DimSize(shape, shape.rank() - 1);
    case HloOpcode::kTriangularSolve:
      // Up to k multiply-adds per element of the result, a being k x k.
      if (instruction.operand_count() < 1) return FirstElements(shape);
      return FirstElements(shape) * DimSize(instruction.operand(0)->shape(), shape.rank() - 1);
    case HloOpcode::kTopK: {
      const Shape& values = shape.IsTuple() && shape.tuple_shapes_size() > 0
                                ? shape.tuple_shapes(0)
                                : shape;
      const double k = DimSize(values, values.rank() - 1);
      return OperandElements(instruction, 0) * std::max(std::log2(std::max(k, 2.0)), 1.0);
    }
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      // A few passes over the operand.
      return 4 * OperandElements(instruction, 0);
    case HloOpcode::kScatter: {
      const int64_t n = (instruction.operand_count() - 1) / 2;
      return OperandElements(instruction, n + 1) + OperandElements(instruction, 0);
    }
    default:
      break;
  }
  return LeafElements(shape);
}

namespace evaluator_internal {

Status CheckInstructionWork(const HloInstruction& instruction, double max_work) {
  // Tuples only point at their elements, which are checked where they are made.
  if (instruction.shape().IsArray() && shape_util::ByteSizeOf(instruction.shape()) > PhysicalMemoryBytes()) {
    return Error(fmt::format(
        "%{} = {} {}(...) needs {} for its result, more than this machine's memory ({}); refused "
        "before it ran",
        instruction.name(), instruction.shape().ToString(false), HloOpcodeString(instruction.opcode()),
        FormatBytes(shape_util::ByteSizeOf(instruction.shape())), FormatBytes(PhysicalMemoryBytes())));
  }
  if (max_work <= 0) return OkStatus();
  const double work = EvaluationWork(instruction);
  if (work <= max_work) return OkStatus();
  return Error(fmt::format(
      "%{} = {} {}(...) needs {:.3g} scalar operations, more than the limit of {:.3g} on one "
      "instruction; refused before it ran (--max-work raises the limit, 0 removes it)",
      instruction.name(), instruction.shape().ToString(false),
      HloOpcodeString(instruction.opcode()), work, max_work));
}

}  // namespace evaluator_internal

Status CheckEvaluationWork(const HloModule& module, double max_work) {
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      RETURN_IF_ERROR(evaluator_internal::CheckInstructionWork(*instruction, max_work));
    }
  }
  return OkStatus();
}

}  // namespace xlens
