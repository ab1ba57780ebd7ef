#include "compiler/passes/dot_decomposer.h"

#include <optional>
#include <vector>

#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

std::optional<DotDimensionNumbers> DimensionNumbersOf(const HloInstruction& dot) {
  if (dot.dot_dimension_numbers) return *dot.dot_dimension_numbers;
  // The classic matrix/vector product XLA assumes when none are written.
  const int64_t lhs_rank = dot.operand(0)->shape().rank();
  const int64_t rhs_rank = dot.operand(1)->shape().rank();
  if (lhs_rank > 2 || rhs_rank > 2) return std::nullopt;
  DotDimensionNumbers dnums;
  if (lhs_rank >= 1) dnums.lhs_contracting_dimensions = {lhs_rank - 1};
  if (rhs_rank >= 1) dnums.rhs_contracting_dimensions = {0};
  return dnums;
}

bool IsIota(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool IsCanonical(const HloInstruction& dot, const DotDimensionNumbers& dnums) {
  const int64_t batch = static_cast<int64_t>(dnums.lhs_batch_dimensions.size());
  const int64_t lhs_rank = dot.operand(0)->shape().rank();
  const int64_t rhs_rank = dot.operand(1)->shape().rank();
  return dot.dot_dimension_numbers.has_value() && IsIota(dnums.lhs_batch_dimensions) &&
         IsIota(dnums.rhs_batch_dimensions) && dnums.lhs_contracting_dimensions.size() == 1 &&
         dnums.rhs_contracting_dimensions.size() == 1 &&
         (lhs_rank == batch + 1 || lhs_rank == batch + 2) &&
         (rhs_rank == batch + 1 || rhs_rank == batch + 2) &&
         dnums.lhs_contracting_dimensions[0] == lhs_rank - 1 &&
         dnums.rhs_contracting_dimensions[0] == batch;
}

class Decomposer {
 public:
  Decomposer(HloComputation* computation, HloInstruction* dot)
      : computation_(computation), dot_(dot) {}

  // `operand` transposed to batch, then `first`, then `second` dimensions, and reshaped to
  // [batch..., product(first), product(second)]; a product over no dimensions is left out when
  // `drop_empty_first`/`drop_empty_second` says so, else kept as 1.
  HloInstruction* Canonicalize(HloInstruction* operand, const std::vector<int64_t>& batch,
                               const std::vector<int64_t>& first, bool drop_empty_first,
                               const std::vector<int64_t>& second, bool drop_empty_second) {
    const Shape& shape = operand->shape();
    std::vector<int64_t> order = batch;
    order.insert(order.end(), first.begin(), first.end());
    order.insert(order.end(), second.begin(), second.end());
    HloInstruction* result = operand;
    if (!IsIota(order)) {
      std::vector<int64_t> dims;
      for (int64_t d : order) dims.push_back(shape.dimensions(d));
      result = Add(HloOpcode::kTranspose, ShapeLike(shape.element_type(), dims, dot_->shape()),
                   result, order);
    }
    std::vector<int64_t> dims;
    for (int64_t d : batch) dims.push_back(shape.dimensions(d));
    auto product = [&](const std::vector<int64_t>& of) {
      int64_t n = 1;
      for (int64_t d : of) n *= shape.dimensions(d);
      return n;
    };
    if (!first.empty() || !drop_empty_first) dims.push_back(product(first));
    if (!second.empty() || !drop_empty_second) dims.push_back(product(second));
    if (dims != result->shape().dimensions()) {
      result = Add(HloOpcode::kReshape, ShapeLike(shape.element_type(), dims, dot_->shape()),
                   result);
    }
    return result;
  }

  HloInstruction* Add(HloOpcode opcode, Shape shape, HloInstruction* operand,
                      std::optional<std::vector<int64_t>> dimensions = std::nullopt) {
    auto instruction = HloInstruction::CreateUnary(opcode, std::move(shape), operand);
    instruction->dimensions_attr = std::move(dimensions);
    instruction->metadata = dot_->metadata;
    return computation_->AddInstruction(std::move(instruction));
  }

  Status Run(const DotDimensionNumbers& dnums) {
    HloInstruction* lhs = dot_->operand(0);
    HloInstruction* rhs = dot_->operand(1);
    const std::vector<int64_t> lhs_free = FreeDimensions(lhs->shape(), dnums.lhs_batch_dimensions,
                                                         dnums.lhs_contracting_dimensions);
    const std::vector<int64_t> rhs_free = FreeDimensions(rhs->shape(), dnums.rhs_batch_dimensions,
                                                         dnums.rhs_contracting_dimensions);
    HloInstruction* new_lhs = Canonicalize(lhs, dnums.lhs_batch_dimensions, lhs_free, true,
                                           dnums.lhs_contracting_dimensions, false);
    HloInstruction* new_rhs = Canonicalize(rhs, dnums.rhs_batch_dimensions,
                                           dnums.rhs_contracting_dimensions, false, rhs_free, true);
    const int64_t batch = static_cast<int64_t>(dnums.lhs_batch_dimensions.size());
    std::vector<int64_t> result_dims(new_lhs->shape().dimensions().begin(),
                                     new_lhs->shape().dimensions().end() - 1);
    if (!rhs_free.empty()) result_dims.push_back(new_rhs->shape().dimensions().back());
    DotDimensionNumbers canonical;
    for (int64_t i = 0; i < batch; ++i) {
      canonical.lhs_batch_dimensions.push_back(i);
      canonical.rhs_batch_dimensions.push_back(i);
    }
    canonical.lhs_contracting_dimensions = {new_lhs->shape().rank() - 1};
    canonical.rhs_contracting_dimensions = {batch};
    auto new_dot = dot_->CloneWithNewOperands(
        ShapeLike(dot_->shape().element_type(), result_dims, dot_->shape()), {new_lhs, new_rhs});
    new_dot->dot_dimension_numbers = canonical;
    HloInstruction* result = computation_->AddInstruction(std::move(new_dot));
    if (result->shape().dimensions() != dot_->shape().dimensions()) {
      result = Add(HloOpcode::kReshape, dot_->shape(), result);
    } else {
      result->set_shape(dot_->shape());
    }
    return computation_->ReplaceInstruction(dot_, result);
  }

 private:
  static std::vector<int64_t> FreeDimensions(const Shape& shape, const std::vector<int64_t>& batch,
                                             const std::vector<int64_t>& contracting) {
    std::vector<bool> used(shape.rank(), false);
    for (int64_t d : batch) used[d] = true;
    for (int64_t d : contracting) used[d] = true;
    std::vector<int64_t> free;
    for (int64_t d = 0; d < shape.rank(); ++d) {
      if (!used[d]) free.push_back(d);
    }
    return free;
  }

  HloComputation* computation_;
  HloInstruction* dot_;
};

}  // namespace

StatusOr<bool> DotDecomposer::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() != HloOpcode::kDot || instruction->operand_count() != 2) continue;
      const Shape& lhs = instruction->operand(0)->shape();
      const Shape& rhs = instruction->operand(1)->shape();
      if (!lhs.IsArray() || !rhs.IsArray() || !instruction->shape().IsArray() ||
          !lhs.is_static() || !rhs.is_static() || !instruction->shape().is_static()) {
        continue;
      }
      std::optional<DotDimensionNumbers> dnums = DimensionNumbersOf(*instruction);
      if (!dnums || dnums->lhs_batch_dimensions.size() != dnums->rhs_batch_dimensions.size() ||
          dnums->lhs_contracting_dimensions.size() != dnums->rhs_contracting_dimensions.size() ||
          IsCanonical(*instruction, *dnums)) {
        continue;
      }
      RETURN_IF_ERROR(Decomposer(computation, instruction).Run(*dnums));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
