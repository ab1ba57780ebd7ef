#include "compiler/passes/conv_canonicalization.h"

#include <optional>
#include <vector>

#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

bool IsIota(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// The orders in which the canonical form reads the original dimensions of each operand and of the
// result: canonical dimension i is original dimension order[i].
struct CanonicalOrders {
  std::vector<int64_t> input;   // batch, spatial..., feature
  std::vector<int64_t> kernel;  // spatial..., input feature, output feature
  std::vector<int64_t> output;  // batch, spatial..., feature
};

CanonicalOrders OrdersOf(const ConvolutionDimensionNumbers& dnums) {
  CanonicalOrders orders;
  orders.input.push_back(dnums.input_batch_dimension);
  orders.input.insert(orders.input.end(), dnums.input_spatial_dimensions.begin(),
                      dnums.input_spatial_dimensions.end());
  orders.input.push_back(dnums.input_feature_dimension);
  orders.kernel = dnums.kernel_spatial_dimensions;
  orders.kernel.push_back(dnums.kernel_input_feature_dimension);
  orders.kernel.push_back(dnums.kernel_output_feature_dimension);
  orders.output.push_back(dnums.output_batch_dimension);
  orders.output.insert(orders.output.end(), dnums.output_spatial_dimensions.begin(),
                       dnums.output_spatial_dimensions.end());
  orders.output.push_back(dnums.output_feature_dimension);
  return orders;
}

// True when `order` names each of 0..rank-1 exactly once.
bool IsPermutation(const std::vector<int64_t>& order, int64_t rank) {
  if (static_cast<int64_t>(order.size()) != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t d : order) {
    if (d < 0 || d >= rank || seen[d]) return false;
    seen[d] = true;
  }
  return true;
}

ConvolutionDimensionNumbers CanonicalDimensionNumbers(int64_t spatial) {
  ConvolutionDimensionNumbers dnums;
  dnums.input_batch_dimension = 0;
  dnums.input_feature_dimension = spatial + 1;
  dnums.kernel_input_feature_dimension = spatial;
  dnums.kernel_output_feature_dimension = spatial + 1;
  dnums.output_batch_dimension = 0;
  dnums.output_feature_dimension = spatial + 1;
  for (int64_t i = 0; i < spatial; ++i) {
    dnums.input_spatial_dimensions.push_back(i + 1);
    dnums.kernel_spatial_dimensions.push_back(i);
    dnums.output_spatial_dimensions.push_back(i + 1);
  }
  return dnums;
}

std::vector<int64_t> Permuted(const Shape& shape, const std::vector<int64_t>& order) {
  std::vector<int64_t> dims;
  for (int64_t d : order) dims.push_back(shape.dimensions(d));
  return dims;
}

class Canonicalizer {
 public:
  Canonicalizer(HloComputation* computation, HloInstruction* conv)
      : computation_(computation), conv_(conv) {}

  Status Run(const CanonicalOrders& orders) {
    HloInstruction* input = TransposeTo(conv_->operand(0), orders.input);
    HloInstruction* kernel = TransposeTo(conv_->operand(1), orders.kernel);
    const Shape& shape = conv_->shape();
    auto new_conv = conv_->CloneWithNewOperands(
        ShapeLike(shape.element_type(), Permuted(shape, orders.output), shape), {input, kernel});
    new_conv->convolution_dimension_numbers =
        CanonicalDimensionNumbers(static_cast<int64_t>(orders.output.size()) - 2);
    HloInstruction* result = computation_->AddInstruction(std::move(new_conv));
    if (IsIota(orders.output)) {
      result->set_shape(shape);
    } else {
      // Canonical dimension i holds original dimension orders.output[i]; the transpose back reads
      // original dimension d from canonical dimension inverse[d].
      std::vector<int64_t> inverse(orders.output.size());
      for (size_t i = 0; i < orders.output.size(); ++i) {
        inverse[orders.output[i]] = static_cast<int64_t>(i);
      }
      result = AddTranspose(shape, result, std::move(inverse));
    }
    return computation_->ReplaceInstruction(conv_, result);
  }

 private:
  HloInstruction* TransposeTo(HloInstruction* operand, const std::vector<int64_t>& order) {
    if (IsIota(order)) return operand;
    const Shape& shape = operand->shape();
    return AddTranspose(ShapeLike(shape.element_type(), Permuted(shape, order), conv_->shape()),
                        operand, order);
  }

  HloInstruction* AddTranspose(Shape shape, HloInstruction* operand,
                               std::vector<int64_t> permutation) {
    auto transpose = HloInstruction::CreateUnary(HloOpcode::kTranspose, std::move(shape), operand);
    transpose->dimensions_attr = std::move(permutation);
    transpose->metadata = conv_->metadata;
    return computation_->AddInstruction(std::move(transpose));
  }

  HloComputation* computation_;
  HloInstruction* conv_;
};

// The orders to rewrite `conv` with, or nothing when it is canonical already or cannot be
// rewritten safely.
std::optional<CanonicalOrders> OrdersToRewrite(const HloInstruction& conv) {
  if (conv.operand_count() != 2 || !conv.convolution_dimension_numbers) return std::nullopt;
  const Shape& input = conv.operand(0)->shape();
  const Shape& kernel = conv.operand(1)->shape();
  const Shape& output = conv.shape();
  if (!input.IsArray() || !kernel.IsArray() || !output.IsArray() || !input.is_static() ||
      !kernel.is_static() || !output.is_static()) {
    return std::nullopt;
  }
  const ConvolutionDimensionNumbers& dnums = *conv.convolution_dimension_numbers;
  const int64_t spatial = static_cast<int64_t>(dnums.input_spatial_dimensions.size());
  if (static_cast<int64_t>(dnums.kernel_spatial_dimensions.size()) != spatial ||
      static_cast<int64_t>(dnums.output_spatial_dimensions.size()) != spatial) {
    return std::nullopt;
  }
  CanonicalOrders orders = OrdersOf(dnums);
  if (!IsPermutation(orders.input, input.rank()) || !IsPermutation(orders.kernel, kernel.rank()) ||
      !IsPermutation(orders.output, output.rank())) {
    return std::nullopt;
  }
  if (IsIota(orders.input) && IsIota(orders.kernel) && IsIota(orders.output)) return std::nullopt;
  return orders;
}

}  // namespace

StatusOr<bool> ConvCanonicalization::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() != HloOpcode::kConvolution) continue;
      std::optional<CanonicalOrders> orders = OrdersToRewrite(*instruction);
      if (!orders) continue;
      RETURN_IF_ERROR(Canonicalizer(computation, instruction).Run(*orders));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
