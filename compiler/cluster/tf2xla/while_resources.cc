#include "compiler/cluster/tf2xla/while_resources.h"

#include <fmt/format.h>

namespace xlens::cluster {

bool IsMadeResource(const XlaExpression& e) {
  return e.kind() == XlaExpression::Kind::kResource &&
         e.resource()->kind != XlaResource::Kind::kVariable;
}

StatusOr<HloInstruction*> ZerosOfShape(HloBuilder& builder, const Shape& shape) {
  if (!shape.IsTuple()) {
    return builder.FullConstant(shape.element_type(), 0, shape.dimensions());
  }
  std::vector<HloInstruction*> parts;
  for (const Shape& part : shape.tuple_shapes()) {
    ASSIGN_OR_RETURN(HloInstruction * zeros, ZerosOfShape(builder, part));
    parts.push_back(zeros);
  }
  return builder.Tuple(parts);
}

void PrepareFirstPassCopy(const XlaResource& outer, XlaResource& copy) {
  if (outer.value == nullptr) {
    copy.value = nullptr;
    copy.initial_value = nullptr;
  }
  copy.gradients.clear();
  copy.make_gradients = true;
}

StatusOr<std::vector<CarriedGradient>> GradientsToCarry(
    HloBuilder& builder, const std::vector<XlaExpression>& inputs,
    const std::vector<std::set<std::string>>& sources) {
  std::vector<CarriedGradient> carried;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsMadeResource(inputs[i])) continue;
    XlaResource* a = inputs[i].resource();
    if (a->kind != XlaResource::Kind::kTensorArray) continue;
    for (const std::string& source : i < sources.size() ? sources[i] : std::set<std::string>{}) {
      std::shared_ptr<XlaResource>& grad = a->gradients[source];
      if (grad != nullptr) continue;
      if (a->value == nullptr) {
        return Status::Error(fmt::format("the body takes the gradient of TensorArray '{}', "
                                         "which has no element shape when the loop starts",
                                         a->name));
      }
      grad = std::make_shared<XlaResource>();
      grad->kind = XlaResource::Kind::kTensorArray;
      grad->name = a->name + "@" + source;
      grad->dtype = a->dtype;
      grad->size = a->size;
      grad->gradient = true;
      ASSIGN_OR_RETURN(grad->value, ZerosOfShape(builder, a->value->shape()));
      grad->initial_value = grad->value;
    }
    for (const auto& [source, grad] : a->gradients) {
      if (grad->value == nullptr) continue;
      carried.push_back(CarriedGradient{i, source, grad});
    }
  }
  return carried;
}

Status BindCarriedGradients(HloBuilder& body, HloInstruction* param, size_t first_element,
                            const std::vector<CarriedGradient>& carried,
                            std::vector<std::unique_ptr<XlaResource>>& copies) {
  for (size_t k = 0; k < carried.size(); ++k) {
    const CarriedGradient& g = carried[k];
    if (g.input >= copies.size() || copies[g.input] == nullptr) {
      return Status::Error("a carried gradient array belongs to no loop variable");
    }
    auto local = std::make_shared<XlaResource>(*g.outer);
    local->gradients.clear();
    ASSIGN_OR_RETURN(local->value,
                     body.GetTupleElement(param, static_cast<int64_t>(first_element + k)));
    local->initial_value = local->value;
    local->modified = false;
    copies[g.input]->gradients[g.source] = std::move(local);
  }
  return OkStatus();
}

}  // namespace xlens::cluster
