#include "compiler/graph/shape_inference.h"

#include "compiler/graph/graph.h"

namespace xlens::graph {

InferenceContext::InferenceContext(const Node* node, const AttrMap* attrs,
                                   std::vector<PartialShape> input_shapes,
                                   std::vector<DataType> input_types,
                                   std::vector<DataType> output_types,
                                   std::vector<const Tensor*> input_tensors)
    : node_(node),
      attrs_(attrs),
      inputs_(std::move(input_shapes)),
      input_types_(std::move(input_types)),
      output_types_(std::move(output_types)),
      input_tensors_(std::move(input_tensors)),
      outputs_(output_types_.size()),
      input_handles_(inputs_.size()),
      output_handles_(output_types_.size()) {
  if (input_tensors_.size() < inputs_.size()) input_tensors_.resize(inputs_.size(), nullptr);
}

const std::string& InferenceContext::node_name() const { return node_->name(); }
const std::string& InferenceContext::op() const { return node_->type_string(); }

StatusOr<PartialShape> InferenceContext::MakeShapeFromShapeTensor(int i) const {
  if (const Tensor* t = input_tensor(i)) {
    if (t->rank() > 1) return Error("shape input must be a vector, got " + DimsToString(t->dims()));
    std::vector<int64_t> dims = t->AsInt64Vector();
    for (int64_t& d : dims) {
      if (d < -1) return Error("shape input has a negative dimension " + std::to_string(d));
    }
    return PartialShape(std::move(dims));
  }
  const PartialShape& s = input(i);
  if (s.rank() == 1 && s.dim(0) >= 0) return PartialShape::UnknownOfRank(s.dim(0));
  return PartialShape::UnknownRank();
}

void InferenceContext::set_output_handle_shape(int i, PartialShape shape, DataType dtype) {
  output_handles_[i] = std::make_pair(std::move(shape), dtype);
}
const std::optional<std::pair<PartialShape, DataType>>& InferenceContext::input_handle_shape(
    int i) const {
  return input_handles_[i];
}
const std::optional<std::pair<PartialShape, DataType>>& InferenceContext::output_handle_shape(
    int i) const {
  return output_handles_[i];
}
void InferenceContext::set_input_handle_shapes(
    std::vector<std::optional<std::pair<PartialShape, DataType>>> s) {
  input_handles_ = std::move(s);
  input_handles_.resize(inputs_.size());
}

Status InferenceContext::WithRank(int i, int64_t rank, PartialShape* out) const {
  const PartialShape& s = input(i);
  if (s.unknown_rank()) {
    *out = PartialShape::UnknownOfRank(rank);
    return OkStatus();
  }
  if (s.rank() != rank) {
    return Error("input " + std::to_string(i) + " must be rank " + std::to_string(rank) +
                 ", got shape " + s.ToString());
  }
  *out = s;
  return OkStatus();
}

Status InferenceContext::WithRankAtLeast(int i, int64_t rank, PartialShape* out) const {
  const PartialShape& s = input(i);
  if (!s.unknown_rank() && s.rank() < rank) {
    return Error("input " + std::to_string(i) + " must be at least rank " + std::to_string(rank) +
                 ", got shape " + s.ToString());
  }
  *out = s;
  return OkStatus();
}

Status InferenceContext::Error(const std::string& message) const {
  return Status::Error("node '" + node_name() + "' (" + op() + "): " + message);
}

template <>
StatusOr<DataType> InferenceContext::GetAttr<DataType>(const std::string& name) const {
  return GetTypeAttr(attrs(), name, node_name());
}
template <>
StatusOr<int64_t> InferenceContext::GetAttr<int64_t>(const std::string& name) const {
  return GetIntAttr(attrs(), name, node_name());
}
template <>
StatusOr<float> InferenceContext::GetAttr<float>(const std::string& name) const {
  return GetFloatAttr(attrs(), name, node_name());
}
template <>
StatusOr<bool> InferenceContext::GetAttr<bool>(const std::string& name) const {
  return GetBoolAttr(attrs(), name, node_name());
}
template <>
StatusOr<std::string> InferenceContext::GetAttr<std::string>(const std::string& name) const {
  return GetStringAttr(attrs(), name, node_name());
}
template <>
StatusOr<PartialShape> InferenceContext::GetAttr<PartialShape>(const std::string& name) const {
  return GetShapeAttr(attrs(), name, node_name());
}
template <>
StatusOr<Tensor> InferenceContext::GetAttr<Tensor>(const std::string& name) const {
  return GetTensorAttr(attrs(), name, node_name());
}
template <>
StatusOr<std::vector<int64_t>> InferenceContext::GetAttr<std::vector<int64_t>>(
    const std::string& name) const {
  return GetIntListAttr(attrs(), name, node_name());
}
template <>
StatusOr<std::vector<DataType>> InferenceContext::GetAttr<std::vector<DataType>>(
    const std::string& name) const {
  return GetTypeListAttr(attrs(), name, node_name());
}

namespace shape_fn {

Status UnknownShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialShape::UnknownRank());
  return OkStatus();
}

Status UnchangedShape(InferenceContext& c) {
  c.set_output(0, c.input(0));
  if (c.input_handle_shape(0)) {
    c.set_output_handle_shape(0, c.input_handle_shape(0)->first, c.input_handle_shape(0)->second);
  }
  return OkStatus();
}

Status ScalarShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialShape::Scalar());
  return OkStatus();
}

Status NoOutputs(InferenceContext& c) { return OkStatus(); }

StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b) {
  if (a.unknown_rank() || b.unknown_rank()) return PartialShape::UnknownRank();
  int64_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.rank() ? 1 : a.dim(i - (rank - a.rank()));
    int64_t db = i < rank - b.rank() ? 1 : b.dim(i - (rank - b.rank()));
    if (da == 1) {
      dims[i] = db;
    } else if (db == 1) {
      dims[i] = da;
    } else if (da < 0) {
      dims[i] = db;  // unknown vs known (not 1): the known one, or unknown when both are
    } else if (db < 0) {
      dims[i] = da;
    } else if (da == db) {
      dims[i] = da;
    } else {
      return Status::Error("incompatible shapes: " + a.ToString() + " vs. " + b.ToString());
    }
  }
  return PartialShape(std::move(dims));
}

Status BroadcastBinaryOpShape(InferenceContext& c) {
  auto s = BroadcastShapes(c.input(0), c.input(1));
  if (!s.ok()) return c.Error(s.status().message());
  c.set_output(0, std::move(*s));
  return OkStatus();
}

}  // namespace shape_fn
}  // namespace xlens::graph
