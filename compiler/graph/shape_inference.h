// Shape inference: a shape function sees its node's input shapes (and the values of inputs
// that are known constants, such as Reshape's shape) and sets its output shapes. Unknown
// dimensions stay unknown; a contradiction is an error naming the node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class Node;

class InferenceContext {
 public:
  InferenceContext(const Node* node, const AttrMap* attrs, std::vector<PartialShape> input_shapes,
                   std::vector<DataType> input_types, std::vector<DataType> output_types,
                   std::vector<const Tensor*> input_tensors);

  const std::string& node_name() const;
  const std::string& op() const;
  const Node* node() const { return node_; }
  const AttrMap& attrs() const { return *attrs_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const PartialShape& input(int i) const { return inputs_[i]; }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  // The value of input i when it is a known constant (a Const, or computed from constants),
  // nullptr otherwise.
  const Tensor* input_tensor(int i) const { return input_tensors_[i]; }
  // For ops whose input is a shape vector (Reshape, Fill, ...): the shape it denotes, with
  // unknown entries (-1, or a non-constant input of known length) as unknown dimensions.
  StatusOr<PartialShape> MakeShapeFromShapeTensor(int input) const;

  void set_output(int i, PartialShape shape) { outputs_[i] = std::move(shape); }
  const PartialShape& output(int i) const { return outputs_[i]; }
  const std::vector<PartialShape>& outputs() const { return outputs_; }

  // Resource inputs carry the shape and type of the variable they point to, when known.
  void set_output_handle_shape(int i, PartialShape shape, DataType dtype);
  const std::optional<std::pair<PartialShape, DataType>>& input_handle_shape(int i) const;
  const std::optional<std::pair<PartialShape, DataType>>& output_handle_shape(int i) const;
  void set_input_handle_shapes(std::vector<std::optional<std::pair<PartialShape, DataType>>> s);

  // Helpers for shape functions (messages name the node).
  Status WithRank(int input, int64_t rank, PartialShape* out) const;
  Status WithRankAtLeast(int input, int64_t rank, PartialShape* out) const;
  Status Error(const std::string& message) const;  // "node 'x' (Op): message"

  template <typename T>
  StatusOr<T> GetAttr(const std::string& name) const;

 private:
  const Node* node_;
  const AttrMap* attrs_;
  std::vector<PartialShape> inputs_;
  std::vector<DataType> input_types_;
  std::vector<DataType> output_types_;
  std::vector<const Tensor*> input_tensors_;
  std::vector<PartialShape> outputs_;
  std::vector<std::optional<std::pair<PartialShape, DataType>>> input_handles_;
  std::vector<std::optional<std::pair<PartialShape, DataType>>> output_handles_;
};

// Shape functions shared by many ops.
namespace shape_fn {
Status UnknownShape(InferenceContext& c);    // every output unknown
Status UnchangedShape(InferenceContext& c);  // output 0 = input 0
Status ScalarShape(InferenceContext& c);
Status NoOutputs(InferenceContext& c);
// NumPy broadcasting of inputs 0 and 1 (TensorFlow's BroadcastBinaryOpShapeFn).
Status BroadcastBinaryOpShape(InferenceContext& c);
// Broadcasts two shapes; error when they are incompatible.
StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b);
}  // namespace shape_fn

}  // namespace xlens::graph
