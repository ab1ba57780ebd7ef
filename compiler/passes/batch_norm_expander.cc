#include "compiler/passes/batch_norm_expander.h"

#include <map>
#include <string>
#include <vector>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

// The instructions of one expansion, each added to the batch norm's computation with its
// metadata. Names and order follow XLA's BatchNormExpander, so that the arithmetic (and its
// rounding) is the same.
class Expander {
 public:
  Expander(HloModule& module, HloComputation* computation, HloInstruction* batch_norm,
           const BatchNormAttributes& attributes,
           std::map<PrimitiveType, HloComputation*>& add_computations)
      : module_(module), computation_(computation), batch_norm_(batch_norm),
        feature_index_(attributes.feature_index), add_computations_(add_computations) {
    const Shape& operand = batch_norm->operand(0)->shape();
    operand_shape_ = operand;
    type_ = operand.element_type();
    // XLA keeps epsilon as a float and converts it to the element type.
    epsilon_ = static_cast<double>(static_cast<float>(attributes.epsilon));
    elements_per_feature_ = 1;
    for (int64_t d = 0; d < operand.rank(); ++d) {
      if (d == feature_index_) continue;
      elements_per_feature_ *= operand.dimensions(d);
      dimensions_without_feature_.push_back(d);
    }
  }

  Status ExpandTraining() {
    HloInstruction* operand = batch_norm_->operand(0);
    HloInstruction* scale = batch_norm_->operand(1);
    HloInstruction* offset = batch_norm_->operand(2);
    const Shape& feature_shape = scale->shape();
    HloInstruction* zero = Scalar(0);
    HloInstruction* epsilon = Broadcast(Scalar(epsilon_), operand_shape_, {});
    HloInstruction* elements_per_feature = Scalar(static_cast<double>(elements_per_feature_));
    HloInstruction* scale_broadcasted = FeatureBroadcast(scale);
    HloInstruction* offset_broadcasted = FeatureBroadcast(offset);
    // X^2, Sum[X], Sum[X^2].
    HloInstruction* operand_squared = Binary(HloOpcode::kMultiply, operand, operand);
    HloInstruction* sum = Reduce(operand, zero, feature_shape);
    HloInstruction* squared_sum = Reduce(operand_squared, zero, feature_shape);
    // E[X], E[X^2], E^2[X], Var[X] = E[X^2] - E^2[X].
    HloInstruction* mean = Mean(sum, elements_per_feature);
    HloInstruction* mean_broadcasted = FeatureBroadcast(mean);
    HloInstruction* square_mean = Mean(squared_sum, elements_per_feature);
    HloInstruction* mean_square = Binary(HloOpcode::kMultiply, mean, mean);
    HloInstruction* var = Binary(HloOpcode::kSubtract, square_mean, mean_square);
    HloInstruction* var_broadcasted = FeatureBroadcast(var);
    // 1 / Sqrt[Var[X] + epsilon].
    HloInstruction* var_add_epsilon = Binary(HloOpcode::kAdd, var_broadcasted, epsilon);
    HloInstruction* rsqrt_var_add_epsilon = Unary(HloOpcode::kRsqrt, var_add_epsilon);
    // (X - E[X]) / Sqrt[Var[X] + epsilon] * scale + offset.
    HloInstruction* operand_minus_mean = Binary(HloOpcode::kSubtract, operand, mean_broadcasted);
    HloInstruction* normalized =
        Binary(HloOpcode::kMultiply, operand_minus_mean, rsqrt_var_add_epsilon);
    HloInstruction* scaled_normalized = Binary(HloOpcode::kMultiply, normalized, scale_broadcasted);
    HloInstruction* shifted_normalized =
        Binary(HloOpcode::kAdd, scaled_normalized, offset_broadcasted);
    return Replace({shifted_normalized, mean, var});
  }

  Status ExpandInference() {
    HloInstruction* operand = batch_norm_->operand(0);
    HloInstruction* scale = batch_norm_->operand(1);
    HloInstruction* offset = batch_norm_->operand(2);
    HloInstruction* mean = batch_norm_->operand(3);
    HloInstruction* var = batch_norm_->operand(4);
    HloInstruction* epsilon = Broadcast(Scalar(epsilon_), scale->shape(), {});
    // true_scale = scale * rsqrt(var + epsilon); true_shift = offset - mean * true_scale.
    HloInstruction* true_scale =
        Binary(HloOpcode::kMultiply, scale,
               Unary(HloOpcode::kRsqrt, Binary(HloOpcode::kAdd, var, epsilon)));
    HloInstruction* true_shift = Binary(HloOpcode::kSubtract, offset,
                                        Binary(HloOpcode::kMultiply, mean, true_scale));
    HloInstruction* shifted_normalized =
        Binary(HloOpcode::kAdd,
               Binary(HloOpcode::kMultiply, operand, FeatureBroadcast(true_scale)),
               FeatureBroadcast(true_shift));
    return computation_->ReplaceInstruction(batch_norm_, shifted_normalized);
  }

  Status ExpandGrad() {
    HloInstruction* activation = batch_norm_->operand(0);
    HloInstruction* scale = batch_norm_->operand(1);
    HloInstruction* mean = batch_norm_->operand(2);
    HloInstruction* variance = batch_norm_->operand(3);
    HloInstruction* grad_output = batch_norm_->operand(4);
    const Shape& feature_shape = scale->shape();
    HloInstruction* elements_per_feature = Scalar(static_cast<double>(elements_per_feature_));
    HloInstruction* zero = Scalar(0);
    HloInstruction* epsilon_scalar = Scalar(epsilon_);
    HloInstruction* epsilon_activation = Broadcast(epsilon_scalar, operand_shape_, {});
    HloInstruction* epsilon_feature = Broadcast(epsilon_scalar, feature_shape, {});
    HloInstruction* scale_broadcasted = FeatureBroadcast(scale);
    HloInstruction* variance_broadcasted = FeatureBroadcast(variance);
    HloInstruction* mean_broadcasted = FeatureBroadcast(mean);
    // rsqrt[Var[X] + epsilon], per element and per feature.
    HloInstruction* rsqrt_var_add_epsilon_broadcasted = Unary(
        HloOpcode::kRsqrt, Binary(HloOpcode::kAdd, variance_broadcasted, epsilon_activation));
    HloInstruction* rsqrt_var_add_epsilon =
        Unary(HloOpcode::kRsqrt, Binary(HloOpcode::kAdd, variance, epsilon_feature));
    // X - E[X], Grad[Y] * (X - E[X]) and its sum.
    HloInstruction* activation_minus_mean =
        Binary(HloOpcode::kSubtract, activation, mean_broadcasted);
    HloInstruction* grad_output_times_activation_minus_mean =
        Binary(HloOpcode::kMultiply, grad_output, activation_minus_mean);
    HloInstruction* sum_grad_output_times_activation_minus_mean =
        Reduce(grad_output_times_activation_minus_mean, zero, feature_shape);
    // Grad[beta] = Sum(Grad[Y]); Grad[scale] = Sum(Grad[Y] * (X - E[X])) * rsqrt[Var + eps].
    HloInstruction* grad_beta = Reduce(grad_output, zero, feature_shape);
    HloInstruction* grad_scale = Binary(HloOpcode::kMultiply,
                                        sum_grad_output_times_activation_minus_mean,
                                        rsqrt_var_add_epsilon);
    // I2 = Sum(Grad[Y]), I3 = Sum(Grad[Y] * (X - E[X])), I4 = (X - E[X]) * I3,
    // I5 = I4 / (Var[X] + epsilon).
    HloInstruction* i2 = FeatureBroadcast(grad_beta);
    HloInstruction* i3 = FeatureBroadcast(sum_grad_output_times_activation_minus_mean);
    HloInstruction* i4 = Binary(HloOpcode::kMultiply, i3, activation_minus_mean);
    HloInstruction* i5 = Binary(HloOpcode::kDivide, i4,
                                Binary(HloOpcode::kAdd, variance_broadcasted, epsilon_activation));
    // scale * rsqrt[Var[X] + epsilon] * 1/N.
    HloInstruction* scale_times_rsqrt_var_add_epsilon =
        Binary(HloOpcode::kMultiply, scale_broadcasted, rsqrt_var_add_epsilon_broadcasted);
    scale_times_rsqrt_var_add_epsilon =
        Mean(scale_times_rsqrt_var_add_epsilon, elements_per_feature);
    // I1 = Grad[Y] * N, I6 = I1 - I2 - I5, Grad[X] = scale * rsqrt[Var + eps] * 1/N * I6.
    HloInstruction* i1 = Binary(HloOpcode::kMultiply, grad_output,
                                Broadcast(elements_per_feature, operand_shape_, {}));
    HloInstruction* i6 =
        Binary(HloOpcode::kSubtract, Binary(HloOpcode::kSubtract, i1, i2), i5);
    HloInstruction* grad_activation =
        Binary(HloOpcode::kMultiply, scale_times_rsqrt_var_add_epsilon, i6);
    return Replace({grad_activation, grad_scale, grad_beta});
  }

 private:
  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction) {
    instruction->metadata = batch_norm_->metadata;
    return computation_->AddInstruction(std::move(instruction));
  }

  HloInstruction* Scalar(double value) {
    return Add(CreateScalarConstant(ScalarLike(type_, operand_shape_), value));
  }

  HloInstruction* Broadcast(HloInstruction* operand, const Shape& shape,
                            std::vector<int64_t> dimensions) {
    return Add(CreateBroadcast(shape, operand, std::move(dimensions)));
  }

  // A per-feature value along feature_index of the operand's shape.
  HloInstruction* FeatureBroadcast(HloInstruction* feature) {
    return Broadcast(feature, operand_shape_, {feature_index_});
  }

  HloInstruction* Unary(HloOpcode opcode, HloInstruction* operand) {
    return Add(HloInstruction::CreateUnary(opcode, operand->shape(), operand));
  }

  // Elementwise, in the shape of `lhs` (both operands have it, layouts aside).
  HloInstruction* Binary(HloOpcode opcode, HloInstruction* lhs, HloInstruction* rhs) {
    return Add(HloInstruction::CreateBinary(opcode, lhs->shape(), lhs, rhs));
  }

  // `sum` divided by the element count, broadcast to its shape (XLA's Mean).
  HloInstruction* Mean(HloInstruction* sum, HloInstruction* element_count) {
    return Binary(HloOpcode::kDivide, sum, Broadcast(element_count, sum->shape(), {}));
  }

  HloInstruction* Reduce(HloInstruction* operand, HloInstruction* init, const Shape& shape) {
    auto reduce = HloInstruction::CreateBinary(HloOpcode::kReduce, shape, operand, init);
    reduce->dimensions_attr = dimensions_without_feature_;
    reduce->SetCalledComputation("to_apply", AddComputation());
    return Add(std::move(reduce));
  }

  HloComputation* AddComputation() {
    HloComputation*& computation = add_computations_[type_];
    if (computation != nullptr) return computation;
    computation = module_.AddComputationBefore(
        std::make_unique<HloComputation>("scalar_add_computation"), computation_);
    const Shape scalar = ScalarLike(type_, operand_shape_);
    HloInstruction* lhs =
        computation->AddInstruction(HloInstruction::CreateParameter(0, scalar, "lhs"));
    HloInstruction* rhs =
        computation->AddInstruction(HloInstruction::CreateParameter(1, scalar, "rhs"));
    computation->set_root_instruction(computation->AddInstruction(
        HloInstruction::CreateBinary(HloOpcode::kAdd, scalar, lhs, rhs)));
    return computation;
  }

  Status Replace(const std::vector<HloInstruction*>& elements) {
    auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, batch_norm_->shape());
    for (HloInstruction* element : elements) tuple->AppendOperand(element);
    return computation_->ReplaceInstruction(batch_norm_, Add(std::move(tuple)));
  }

  HloModule& module_;
  HloComputation* computation_;
  HloInstruction* batch_norm_;
  int64_t feature_index_;
  std::map<PrimitiveType, HloComputation*>& add_computations_;
  Shape operand_shape_;
  PrimitiveType type_ = PrimitiveType::F32;
  double epsilon_ = 0;
  int64_t elements_per_feature_ = 1;
  std::vector<int64_t> dimensions_without_feature_;
};

bool IsBatchNorm(HloOpcode opcode) {
  return opcode == HloOpcode::kBatchNormTraining || opcode == HloOpcode::kBatchNormInference ||
         opcode == HloOpcode::kBatchNormGrad;
}

}  // namespace

StatusOr<bool> BatchNormExpander::Run(HloModule& module) {
  bool changed = false;
  std::map<PrimitiveType, HloComputation*> add_computations;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (!IsBatchNorm(instruction->opcode())) continue;
      bool is_static = instruction->shape().is_static();
      for (const HloInstruction* operand : instruction->operands()) {
        is_static = is_static && operand->shape().IsArray() && operand->shape().is_static();
      }
      const int64_t operands =
          instruction->opcode() == HloOpcode::kBatchNormTraining ? 3 : 5;
      if (!is_static || instruction->operand_count() != operands) continue;
      ASSIGN_OR_RETURN(BatchNormAttributes attributes, GetBatchNormAttributes(*instruction));
      const int64_t rank = instruction->operand(0)->shape().rank();
      if (attributes.feature_index < 0 || attributes.feature_index >= rank) {
        return Error(instruction->name() + ": feature_index is not a dimension of the operand");
      }
      const std::string name = instruction->name();
      Expander expander(module, computation, instruction, attributes, add_computations);
      Status status;
      switch (instruction->opcode()) {
        case HloOpcode::kBatchNormTraining: status = expander.ExpandTraining(); break;
        case HloOpcode::kBatchNormInference: status = expander.ExpandInference(); break;
        default: status = expander.ExpandGrad(); break;
      }
      RETURN_IF_ERROR(status.WithContext(name));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
