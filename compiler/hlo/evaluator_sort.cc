// Sort: every operand is permuted along one dimension by the order the comparator defines on
// the operands' elements taken together.
#include <algorithm>
#include <numeric>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {

StatusOr<Literal> HandleSort(HloEvaluator& evaluator, const HloInstruction& instruction,
                             std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  const int64_t count = static_cast<int64_t>(operands.size());
  if (count == 0) return Error("sort needs at least one operand");
  const Shape& keys_shape = operands[0]->shape();
  if (instruction.dimensions().size() != 1) return Error("sort needs one dimension");
  const int64_t dimension = instruction.dimensions(0);
  if (dimension < 0 || dimension >= std::max<int64_t>(keys_shape.rank(), 1)) {
    return Error(fmt::format("sort dimension {} out of range", dimension));
  }
  std::vector<PrimitiveType> comparator_types;
  std::vector<Literal> results;
  for (int64_t i = 0; i < count; ++i) {
    const Shape& operand_shape = operands[i]->shape();
    RETURN_IF_ERROR(ExpectDimensions(operand_shape, keys_shape.dimensions(), "sort operand"));
    const Shape& result_shape = count == 1 && !shape.IsTuple() ? shape
                                : shape.IsTuple() && shape.tuple_shapes_size() == count
                                    ? shape.tuple_shapes(i)
                                    : Shape();
    if (!shape_util::Compatible(result_shape, operand_shape)) {
      return Error(fmt::format("sort of {} operands into {}", count, shape.ToString(false)));
    }
    comparator_types.push_back(operand_shape.element_type());
    comparator_types.push_back(operand_shape.element_type());
    results.emplace_back(result_shape);
  }
  ASSIGN_OR_RETURN(ScalarCaller comparator,
                   ScalarCaller::Create(evaluator, instruction.to_apply(), comparator_types,
                                        {PrimitiveType::PRED}));

  const int64_t rank = keys_shape.rank();
  const int64_t size = rank == 0 ? 1 : keys_shape.dimensions(dimension);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dimension; ++d) outer *= keys_shape.dimensions(d);
  for (int64_t d = dimension + 1; d < rank; ++d) inner *= keys_shape.dimensions(d);
  std::vector<int64_t> widths;
  for (const Literal* operand : operands) widths.push_back(ByteWidth(operand->shape().element_type()));

  std::vector<int64_t> permutation(size);
  std::vector<const void*> arguments(2 * count);
  Status status;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * size * inner + i;
      auto element = [&](int64_t operand, int64_t k) {
        return operands[operand]->untyped_data() + (base + k * inner) * widths[operand];
      };
      std::iota(permutation.begin(), permutation.end(), 0);
      // Merge sort stays in bounds even when a comparator is not a strict weak order (NaN keys
      // under LT), and its stability is a valid answer for is_stable=false too.
      std::stable_sort(permutation.begin(), permutation.end(), [&](int64_t a, int64_t b) {
        if (!status.ok()) return false;
        for (int64_t k = 0; k < count; ++k) {
          arguments[2 * k] = element(k, a);
          arguments[2 * k + 1] = element(k, b);
        }
        StatusOr<bool> less = comparator.CallPredicate(arguments);
        if (!less.ok()) {
          status = less.status();
          return false;
        }
        return *less;
      });
      RETURN_IF_ERROR(status);
      for (int64_t k = 0; k < count; ++k) {
        uint8_t* out = results[k].untyped_data();
        for (int64_t j = 0; j < size; ++j) {
          std::memcpy(out + (base + j * inner) * widths[k], element(k, permutation[j]), widths[k]);
        }
      }
    }
  }
  if (count == 1 && !shape.IsTuple()) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

}  // namespace xlens::evaluator_internal
