// The per-op lowerings of tf2xla: for each TensorFlow op, a function that turns the node's input
// values (XlaExpressions) into output values by adding HLO through the context's builder, as
// TensorFlow's XlaOpKernels do. Families of ops register in their own files (binary_ops.cc,
// unary_ops.cc, reduction_ops.cc, ...) through explicit Register*XlaOps calls that Global() makes
// once, so a static library never drops a registration.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/cluster/tf2xla/hlo_builder.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// A resource variable seen by the lowering: an argument of the function whose current value is
// an HLO value (the parameter, or the last value written). TensorFlow's XlaResource.
struct XlaResource {
  int arg_index = -1;
  std::string name;  // the _Arg node's name, for messages
  graph::DataType dtype = graph::DT_INVALID;
  std::vector<int64_t> shape;
  HloInstruction* initial_value = nullptr;  // the entry parameter; null when uninitialized
  HloInstruction* value = nullptr;          // the current value; null when uninitialized
  bool modified = false;

  // A TensorArray or a stack the function makes (tensor_array_ops.cc, stack_ops.cc), which
  // tf2xla keeps as resources too: a loop carries its value as it carries a variable's.
  //   kTensorArray: the value is the buffer [size, element...]; uninitialized until the first
  //     write gives the element shape when TensorArrayV3 does not. A gradient array's writes
  //     add to it; `gradients` are the arrays TensorArrayGradV3 made of this one, by source.
  //   kStack: the value is the tuple (buffer [max_size, element...], s32 push index).
  enum class Kind { kVariable, kTensorArray, kStack };
  Kind kind = Kind::kVariable;
  int64_t size = 0;  // kTensorArray: its elements; kStack: its max_size
  bool gradient = false;
  std::map<std::string, std::shared_ptr<XlaResource>> gradients;
  // Whether TensorArrayGradV3 may make a gradient array of this one outside the entry
  // computation: in the first compilation of a loop body, which learns what the loop must carry
  // (while_resources.h).
  bool make_gradients = false;
};

// The value of one output of a node while lowering: a compile-time constant (a host tensor), an
// HLO instruction, or a resource variable. TensorFlow's XlaExpression.
class XlaExpression {
 public:
  enum class Kind { kInvalid, kConstant, kXlaOp, kResource };

  XlaExpression() = default;
  static XlaExpression Constant(graph::Tensor value);
  static XlaExpression XlaOp(HloInstruction* op, graph::DataType dtype);
  static XlaExpression Resource(XlaResource* resource);
  // A resource the lowering made (a TensorArray, a stack): the expressions that refer to it keep
  // it alive.
  static XlaExpression OwnedResource(std::shared_ptr<XlaResource> resource);

  Kind kind() const { return kind_; }
  graph::DataType dtype() const { return dtype_; }
  const graph::Tensor& constant_value() const { return constant_; }
  HloInstruction* handle() const { return handle_; }
  XlaResource* resource() const { return resource_; }
  // The static shape (the constant's, the instruction's, or the resource handle's: scalar).
  std::vector<int64_t> shape() const;

  // What the TensorList lowerings know of a list value (tensor_list_ops.h): nothing pushed onto
  // it yet, or the one compile-time constant every element of it holds. The facts travel with
  // the value through Identity, calls and loops; a new value starts without them.
  bool fresh_list() const { return fresh_list_; }
  const graph::Tensor* uniform_list_element() const {
    return uniform_list_element_ ? &*uniform_list_element_ : nullptr;
  }
  XlaExpression WithFreshList() const;
  XlaExpression WithUniformListElement(graph::Tensor element) const;

 private:
  Kind kind_ = Kind::kInvalid;
  graph::DataType dtype_ = graph::DT_INVALID;
  graph::Tensor constant_;
  HloInstruction* handle_ = nullptr;
  XlaResource* resource_ = nullptr;
  std::shared_ptr<XlaResource> owned_resource_;
  bool fresh_list_ = false;
  std::optional<graph::Tensor> uniform_list_element_;
};

// What one op lowering sees: the node, its input expressions, its outputs to set, and the
// builder (already stamped with the node's metadata). TensorFlow's XlaOpKernelContext.
class XlaOpKernelContext {
 public:
  XlaOpKernelContext(const graph::Node& node, std::vector<XlaExpression> inputs,
                     HloBuilder* builder);

  const graph::Node& node() const { return node_; }
  const std::string& name() const { return node_.name(); }
  const std::string& op() const { return node_.type_string(); }
  const graph::AttrMap& attrs() const { return node_.attrs(); }
  HloBuilder& builder() const { return *builder_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const XlaExpression& input_expression(int i) const { return inputs_[i]; }
  graph::DataType input_type(int i) const;
  std::vector<int64_t> InputShape(int i) const;
  // Input i as an HLO value: a constant becomes a `constant` instruction (made once per input).
  StatusOr<HloInstruction*> Input(int i);
  // Input i's value at compile time; an error naming the node and the input when it is not a
  // compile-time constant.
  StatusOr<graph::Tensor> ConstantInput(int i) const;
  StatusOr<std::vector<int64_t>> ConstantInputAsIntVector(int i) const;

  graph::DataType output_type(int i) const { return node_.output_type(i); }
  int num_outputs() const { return node_.num_outputs(); }
  void SetOutput(int i, HloInstruction* op);
  void SetConstantOutput(int i, graph::Tensor value);
  void SetOutputExpression(int i, XlaExpression expression);
  const std::vector<XlaExpression>& outputs() const { return outputs_; }

  // Resource inputs (DT_RESOURCE): the variable, its current value (an error naming the variable
  // when it holds none), and a write.
  StatusOr<XlaResource*> InputResource(int i) const;
  StatusOr<HloInstruction*> ReadVariableInput(int i) const;
  Status AssignVariable(int i, graph::DataType dtype, HloInstruction* value);

  // Attr lookups with the node in the message.
  StatusOr<graph::DataType> GetTypeAttr(const std::string& name) const;
  StatusOr<int64_t> GetIntAttr(const std::string& name) const;
  StatusOr<bool> GetBoolAttr(const std::string& name) const;
  StatusOr<float> GetFloatAttr(const std::string& name) const;
  StatusOr<std::vector<int64_t>> GetIntListAttr(const std::string& name) const;

  // "node 'n' (Op): message".
  Status Error(const std::string& message) const;

 private:
  const graph::Node& node_;
  std::vector<XlaExpression> inputs_;
  std::vector<HloInstruction*> materialized_;
  std::vector<XlaExpression> outputs_;
  HloBuilder* builder_;
};

using XlaOpLowering = std::function<Status(XlaOpKernelContext&)>;

class XlaOpRegistry {
 public:
  // Every lowering of this directory, registered once.
  static const XlaOpRegistry& Global();

  const XlaOpLowering* Find(const std::string& op) const;
  std::vector<std::string> OpNames() const;
  void Register(const std::string& op, XlaOpLowering lowering);
  // A compile-time constant input (tf2xla's CompileTimeConstantInput) the lowering also takes as
  // a value known only at run time, as tf2xla's do where they can (StridedSlice's begin): the
  // compiler then leaves the check to the lowering.
  void AcceptRuntimeInput(const std::string& op, const std::string& arg);
  bool AcceptsRuntimeInput(const std::string& op, const std::string& arg) const;

 private:
  std::map<std::string, XlaOpLowering> lowerings_;
  std::set<std::pair<std::string, std::string>> runtime_inputs_;
};

// The families of lowerings (one file each).
void RegisterUnaryXlaOps(XlaOpRegistry& registry);
void RegisterBinaryXlaOps(XlaOpRegistry& registry);
void RegisterReductionXlaOps(XlaOpRegistry& registry);
void RegisterShapeXlaOps(XlaOpRegistry& registry);
void RegisterDataMovementXlaOps(XlaOpRegistry& registry);
void RegisterStridedSliceXlaOps(XlaOpRegistry& registry);
void RegisterMatMulXlaOps(XlaOpRegistry& registry);
void RegisterNnXlaOps(XlaOpRegistry& registry);
// The 2-D and 3-D poolings, Conv2D (pooling_ops.cc).
void RegisterPoolingXlaOps(XlaOpRegistry& registry);
// Depthwise and 3-D convolutions (conv_ops.cc).
void RegisterConvXlaOps(XlaOpRegistry& registry);
void RegisterVariableXlaOps(XlaOpRegistry& registry);
void RegisterTrainingXlaOps(XlaOpRegistry& registry);
void RegisterTensorListXlaOps(XlaOpRegistry& registry);  // tensor_list_ops.cc
void RegisterTensorListSplitXlaOps(XlaOpRegistry& registry);  // tensor_list_split_ops.cc
void RegisterTensorArrayXlaOps(XlaOpRegistry& registry);  // tensor_array_ops.cc
void RegisterStackXlaOps(XlaOpRegistry& registry);        // stack_ops.cc
void RegisterStatelessRandomXlaOps(XlaOpRegistry& registry);  // stateless_random_ops.cc
// Einsum (einsum_op.cc), Erfc and the special functions (special_math_ops.cc), the resizes
// (image_resize_ops.cc), ConcatOffset and VariableShape (shape_helper_ops.cc), _FusedBatchNormEx
// (fused_batch_norm_ops.cc); RegisterModelXlaOps calls the five.
void RegisterEinsumXlaOps(XlaOpRegistry& registry);
void RegisterSpecialMathXlaOps(XlaOpRegistry& registry);
void RegisterImageResizeXlaOps(XlaOpRegistry& registry);
void RegisterShapeHelperXlaOps(XlaOpRegistry& registry);
void RegisterFusedBatchNormXlaOps(XlaOpRegistry& registry);
void RegisterModelXlaOps(XlaOpRegistry& registry);

// Helpers shared by the families.
// An HLO constant holding `tensor` (numeric types).
StatusOr<HloInstruction*> ConstantToHlo(HloBuilder& builder, const graph::Tensor& tensor);
// The HLO element type of `dtype`, or an error naming the node.
StatusOr<PrimitiveType> XlaType(const XlaOpKernelContext& ctx, graph::DataType dtype);
// The broadcast result dimensions of two shapes (NumPy rules) or an error naming the node.
StatusOr<std::vector<int64_t>> BroadcastShapes(const XlaOpKernelContext& ctx,
                                               const std::vector<int64_t>& a,
                                               const std::vector<int64_t>& b);

// Gathers `indices` from `params` along `axis` (GatherV2 with batch_dims 0, ResourceGather).
StatusOr<HloInstruction*> GatherAlongAxis(HloBuilder& b, HloInstruction* params,
                                          HloInstruction* indices, int64_t axis);

}  // namespace xlens::cluster

// Assigns the value of a builder call to `lhs`, or returns its error with the node of `ctx` named.
#define LOWER_OR_RETURN(lhs, ctx, expr) \
  LOWER_OR_RETURN_IMPL(XLENS_CONCAT(_lowered_, __LINE__), lhs, ctx, expr)
#define LOWER_OR_RETURN_IMPL(tmp, lhs, ctx, expr)                  \
  auto tmp = (expr);                                                \
  if (!tmp.ok()) return (ctx).Error(tmp.status().message());        \
  lhs = std::move(tmp).value()
