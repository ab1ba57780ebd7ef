// Variables (TensorFlow's state_ops.cc and resource_variable_ops.cc). Reference variables:
// VariableV2 outputs the session's variable (named by shared_name, else the node name, in
// `container`), and Assign/AssignAdd/AssignSub/IsVariableInitialized find that variable by
// following their ref input back to its VariableV2. Resource variables: VarHandleOp outputs a
// ResourceHandle and the *VariableOp kernels look the variable up by it. Updates never change a
// tensor another op already holds: they replace the variable's tensor or copy it first.
#include <any>
#include <complex>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/array_ops.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

// TensorFlow reports resources of the default container under this name.
std::string ContainerName(const std::string& container) {
  return container.empty() ? "localhost" : container;
}

struct VariableName {
  std::string container, name;
};

StatusOr<VariableName> NameOfVariableNode(const Node& node) {
  ASSIGN_OR_RETURN(std::string container, GetStringAttr(node.attrs(), "container", node.name()));
  ASSIGN_OR_RETURN(std::string shared, GetStringAttr(node.attrs(), "shared_name", node.name()));
  return VariableName{container, shared.empty() ? node.name() : shared};
}

// The VariableV2 a ref input comes from, through the ops that forward references.
StatusOr<const Node*> RefSource(const OpKernelContext& c, int input) {
  const Node* node = &c.node();
  int slot = input;
  for (int hops = 0; hops < 1000; ++hops) {
    auto [src, out] = node->input_node(slot);
    if (src == nullptr) break;
    const std::string& op = src->type_string();
    if (op == "VariableV2" || op == "Variable" || op == "TemporaryVariable") return src;
    if (!IsRefType(src->output_type(out)) || src->num_inputs() == 0) break;
    // RefIdentity, RefSwitch, RefEnter, RefMerge, Identity of a ref, and the Assign family all
    // forward the reference of their first input.
    node = src;
    slot = 0;
  }
  return c.Error("input " + std::to_string(input) +
                 " is not a reference to a variable (no VariableV2 found behind it)");
}

StatusOr<std::shared_ptr<Var>> RefVariable(const OpKernelContext& c, int input) {
  if (c.resources() == nullptr) return c.Error("no resource manager to hold variables");
  ASSIGN_OR_RETURN(const Node* var_node, RefSource(c, input));
  ASSIGN_OR_RETURN(VariableName n, NameOfVariableNode(*var_node));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(var_node->attrs(), "dtype", var_node->name()));
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(var_node->attrs(), "shape", var_node->name()));
  return c.resources()->LookupOrCreate(n.container, n.name, dtype, shape);
}

// ---- element-wise update --------------------------------------------------------------------

template <typename T>
void AddTyped(Tensor& dst, const Tensor& v, bool subtract) {
  auto d = dst.flat<T>();
  auto s = v.flat<T>();
  for (size_t i = 0; i < d.size(); ++i) d[i] = subtract ? T(d[i] - s[i]) : T(d[i] + s[i]);
}

// dst (not shared) += v or -= v, same dtype and shape.
Status AddInPlace(Tensor& dst, const Tensor& v, bool subtract) {
  switch (dst.dtype()) {
    case DT_FLOAT: AddTyped<float>(dst, v, subtract); break;
    case DT_DOUBLE: AddTyped<double>(dst, v, subtract); break;
    case DT_INT32: AddTyped<int32_t>(dst, v, subtract); break;
    case DT_INT64: AddTyped<int64_t>(dst, v, subtract); break;
    case DT_INT8: AddTyped<int8_t>(dst, v, subtract); break;
    case DT_UINT8: AddTyped<uint8_t>(dst, v, subtract); break;
    case DT_INT16: AddTyped<int16_t>(dst, v, subtract); break;
    case DT_UINT16: AddTyped<uint16_t>(dst, v, subtract); break;
    case DT_UINT32: AddTyped<uint32_t>(dst, v, subtract); break;
    case DT_UINT64: AddTyped<uint64_t>(dst, v, subtract); break;
    case DT_COMPLEX64: AddTyped<std::complex<float>>(dst, v, subtract); break;
    case DT_COMPLEX128: AddTyped<std::complex<double>>(dst, v, subtract); break;
    case DT_HALF:
    case DT_BFLOAT16:
      for (int64_t i = 0; i < dst.num_elements(); ++i) {
        const double a = dst.GetAsDouble(i), b = v.GetAsDouble(i);
        dst.SetFromDouble(i, subtract ? a - b : a + b);
      }
      break;
    default:
      return Status::Error("cannot add tensors of type " + DataTypeName(dst.dtype()));
  }
  return OkStatus();
}

// The variable's tensor plus/minus `value`, as the variable's new tensor.
Status UpdateVariable(const OpKernelContext& c, Var& var, const Tensor& value,
                      bool subtract, const std::string& uninitialized_message) {
  if (!var.is_initialized()) return c.Error(uninitialized_message);
  if (var.value.dims() != value.dims()) {
    return c.Error("Must have the same shape: " + DimsToString(var.value.dims()) + " vs " +
                   DimsToString(value.dims()));
  }
  Tensor updated = var.value;
  updated.MakeUnique();
  Status st = AddInPlace(updated, value, subtract);
  if (!st.ok()) return c.Error(st.message());
  var.value = std::move(updated);
  return OkStatus();
}

// ---- reference variables --------------------------------------------------------------------

Status VariableShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.node_name()));
  c.set_output(0, shape);
  return OkStatus();
}

// Whether every consumer of the node's output tolerates an uninitialised variable (Assign,
// IsVariableInitialized): TensorFlow checks this per consumer; the executor runs only the
// consumers the step needs, so checking them here gives the same answer.
bool OnlyInitializationConsumers(const Node& node) {
  for (const Edge* e : node.out_edges()) {
    if (e->IsControlEdge()) continue;
    if (!e->dst->op_def().allows_uninitialized_input) return false;
  }
  return true;
}

Status VariableV2Kernel(OpKernelContext& c) {
  if (c.resources() == nullptr) return c.Error("no resource manager to hold variables");
  ASSIGN_OR_RETURN(VariableName n, NameOfVariableNode(c.node()));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.name()));
  std::shared_ptr<Var> var = c.resources()->LookupOrCreate(n.container, n.name, dtype, shape);
  std::lock_guard<std::mutex> lock(var->mu);
  if (var->is_initialized()) {
    c.set_output(0, var->value);
    return OkStatus();
  }
  if (!OnlyInitializationConsumers(c.node())) {
    return c.Error("Attempting to use uninitialized value " + c.name());
  }
  // A stand-in the initialising consumers ignore (they find the variable themselves).
  c.set_output(0, Tensor(dtype, {}));
  return OkStatus();
}

Status AssignKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, RefVariable(c, 0));
  ASSIGN_OR_RETURN(bool validate_shape, GetBoolAttr(c.attrs(), "validate_shape", c.name()));
  const Tensor& value = c.input(1);
  std::lock_guard<std::mutex> lock(var->mu);
  if (validate_shape) {
    // An uninitialised variable has the shape it was declared with.
    const bool same = var->is_initialized() ? var->value.dims() == value.dims()
                                            : var->shape.IsCompatibleWith(value.dims());
    if (!same) {
      const std::string lhs = var->is_initialized() ? DimsToString(var->value.dims())
                                                    : var->shape.ToString();
      return c.Error("Assign requires shapes of both tensors to match. lhs shape= " + lhs +
                     " rhs shape= " + DimsToString(value.dims()));
    }
  }
  var->value = value;
  c.set_output(0, value);
  return OkStatus();
}

Status AssignUpdateKernel(OpKernelContext& c, bool subtract) {
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, RefVariable(c, 0));
  ASSIGN_OR_RETURN(const Node* source, RefSource(c, 0));
  std::lock_guard<std::mutex> lock(var->mu);
  RETURN_IF_ERROR(UpdateVariable(c, *var, c.input(1), subtract,
                                 "Attempting to use uninitialized value " + source->name()));
  c.set_output(0, var->value);
  return OkStatus();
}

Status IsVariableInitializedKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, RefVariable(c, 0));
  std::lock_guard<std::mutex> lock(var->mu);
  c.set_output(0, Tensor::Scalar<bool>(DT_BOOL, var->is_initialized()));
  return OkStatus();
}

// ---- resource variables ---------------------------------------------------------------------

Status VarHandleShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.node_name()));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.node_name()));
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, shape, dtype);
  return OkStatus();
}

// Whether `handle` (a VarHandleOp's output kept from an earlier step) names the variable the
// node's attrs name now; the kept state is the node name's, which graphs of one session share.
bool SameVariableHandle(const OpKernelContext& c, const Tensor& handle) {
  const ResourceHandle& h = handle.handle();
  static const std::string kEmpty;
  auto string_attr = [&](const char* attr) -> const std::string* {
    const AttrValue* v = FindAttr(c.attrs(), attr);
    if (v == nullptr) return &kEmpty;
    return v->kind() == AttrValue::Kind::kString ? &v->s() : nullptr;
  };
  const std::string* container = string_attr("container");
  const std::string* shared = string_attr("shared_name");
  const AttrValue* dtype = FindAttr(c.attrs(), "dtype");
  const AttrValue* shape = FindAttr(c.attrs(), "shape");
  if (container == nullptr || shared == nullptr || dtype == nullptr ||
      dtype->kind() != AttrValue::Kind::kType || shape == nullptr ||
      shape->kind() != AttrValue::Kind::kShape) {
    return false;
  }
  const std::string& name = shared->empty() ? c.name() : *shared;
  return h.container == *container && h.name == name && h.dtype == dtype->type() &&
         h.shape == shape->shape() && h.device == c.node().requested_device();
}

Status VarHandleKernel(OpKernelContext& c) {
  // A handle depends on the node's attrs alone: it is built once and the same tensor goes out on
  // every step (a SavedModel's function opens its hundreds of variables on every call).
  if (c.state() != nullptr) {
    if (const auto* kept = std::any_cast<Tensor>(&c.state()->value)) {
      if (SameVariableHandle(c, *kept)) {
        c.set_output(0, *kept);
        return OkStatus();
      }
    }
  }
  ASSIGN_OR_RETURN(VariableName n, NameOfVariableNode(c.node()));
  ResourceHandle h;
  h.container = n.container;
  h.name = n.name;
  h.device = c.node().requested_device();
  ASSIGN_OR_RETURN(h.dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  ASSIGN_OR_RETURN(h.shape, GetShapeAttr(c.attrs(), "shape", c.name()));
  Tensor handle = Tensor::ResourceScalar(std::move(h));
  if (c.state() != nullptr) c.state()->value = handle;
  c.set_output(0, std::move(handle));
  return OkStatus();
}

StatusOr<const ResourceHandle*> HandleInput(const OpKernelContext& c) {
  const Tensor& t = c.input(0);
  if (t.dtype() != DT_RESOURCE || t.num_elements() != 1) {
    return c.Error("expected a scalar resource handle as input 0, got " +
                   DataTypeName(t.dtype()) + " " + DimsToString(t.dims()));
  }
  if (c.resources() == nullptr) return c.Error("no resource manager to hold variables");
  return &t.handle();
}

// TensorFlow's message for reading a variable nobody assigned yet.
std::string NotFoundMessage(const ResourceHandle& h) {
  const std::string container = ContainerName(h.container);
  return "Could not find variable " + h.name +
         ". This could mean that the variable has been deleted. In TF1, it can also mean the "
         "variable is uninitialized. Debug info: container=" + container +
         ", status error message=Resource " + container + "/" + h.name +
         " does not exist. (Could not find resource: " + container + "/" + h.name + ")";
}

// The initialised variable `h` names, or TensorFlow's error.
StatusOr<std::shared_ptr<Var>> InitializedVariable(const OpKernelContext& c,
                                                        const ResourceHandle& h) {
  std::shared_ptr<Var> var = c.resources()->Lookup(h.container, h.name);
  if (var == nullptr || !var->is_initialized()) return c.Error(NotFoundMessage(h));
  return var;
}

Status CheckDtype(const OpKernelContext& c, const Var& var, DataType want) {
  const DataType have = var.is_initialized() ? var.value.dtype() : var.dtype;
  if (have != DT_INVALID && have != want) {
    return c.Error("Trying to read variable with wrong dtype. Expected " + DataTypeName(have) +
                   " got " + DataTypeName(want));
  }
  return OkStatus();
}

Status ReadVariableShape(InferenceContext& c) {
  const auto& handle = c.input_handle_shape(0);
  c.set_output(0, handle ? handle->first : PartialShape::UnknownRank());
  return OkStatus();
}

Status ReadVariableKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, InitializedVariable(c, *h));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  std::lock_guard<std::mutex> lock(var->mu);
  RETURN_IF_ERROR(CheckDtype(c, *var, dtype));
  c.set_output(0, var->value);
  return OkStatus();
}

Status AssignVariableKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  ASSIGN_OR_RETURN(bool validate_shape, GetBoolAttr(c.attrs(), "validate_shape", c.name()));
  const Tensor& value = c.input(1);
  std::shared_ptr<Var> var =
      c.resources()->LookupOrCreate(h->container, h->name, dtype, h->shape);
  std::lock_guard<std::mutex> lock(var->mu);
  if (var->dtype != DT_INVALID && var->dtype != dtype) {
    return c.Error("Trying to assign variable with wrong dtype. Expected " +
                   DataTypeName(var->dtype) + " got " + DataTypeName(dtype));
  }
  if (validate_shape && var->is_initialized() && var->value.dims() != value.dims()) {
    return c.Error("Trying to assign to variable with tensor with wrong shape. Expected " +
                   DimsToString(var->value.dims()) + " got " + DimsToString(value.dims()));
  }
  var->dtype = dtype;
  var->value = value;
  return OkStatus();
}

Status AssignUpdateVariableKernel(OpKernelContext& c, bool subtract) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, InitializedVariable(c, *h));
  std::lock_guard<std::mutex> lock(var->mu);
  return UpdateVariable(c, *var, c.input(1), subtract, NotFoundMessage(*h));
}

Status VarIsInitializedKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  std::shared_ptr<Var> var = c.resources()->Lookup(h->container, h->name);
  c.set_output(0, Tensor::Scalar<bool>(DT_BOOL, var != nullptr && var->is_initialized()));
  return OkStatus();
}

// ResourceMgr has no deletion: the variable goes back to the uninitialised state, which is what
// every later read observes of a deleted variable.
Status DestroyResourceKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  ASSIGN_OR_RETURN(bool ignore, GetBoolAttr(c.attrs(), "ignore_lookup_error", c.name()));
  std::shared_ptr<Var> var = c.resources()->Lookup(h->container, h->name);
  if (var == nullptr || !var->is_initialized()) {
    if (ignore) return OkStatus();
    return c.Error("Resource " + ContainerName(h->container) + "/" + h->name +
                   " does not exist.");
  }
  std::lock_guard<std::mutex> lock(var->mu);
  var->value = Tensor();
  return OkStatus();
}

Status ResourceGatherShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(int64_t batch_dims, IntAttr(c, "batch_dims"));
  const auto& handle = c.input_handle_shape(0);
  const PartialShape& indices = c.input(1);
  if (!handle || handle->first.unknown_rank() || indices.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  const PartialShape& params = handle->first;
  std::vector<int64_t> dims(params.dims().begin(), params.dims().begin() + batch_dims);
  dims.insert(dims.end(), indices.dims().begin() + batch_dims, indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + batch_dims + 1, params.dims().end());
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status ResourceGatherKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const ResourceHandle* h, HandleInput(c));
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, InitializedVariable(c, *h));
  ASSIGN_OR_RETURN(int64_t batch_dims, IntAttr(c, "batch_dims"));
  Tensor params;
  {
    std::lock_guard<std::mutex> lock(var->mu);
    params = var->value;
  }
  return GatherInto(c, params, c.input(1), batch_dims, batch_dims);
}

}  // namespace

void RegisterStateOps(OpRegistry& r) {
  REGISTER_OP(r, "VariableV2")
      .Output("ref: Ref(dtype)")
      .Attr("shape: shape")
      .Attr("dtype: type")
      .Attr("container: string = ''")
      .Attr("shared_name: string = ''")
      .SetIsStateful()
      .NoXlaKernel()
      .SetShapeFn(VariableShape)
      .SetKernel(VariableV2Kernel);
  REGISTER_OP(r, "Assign")
      .Input("ref: Ref(T)")
      .Input("value: T")
      .Output("output_ref: Ref(T)")
      .Attr("T: type")
      .Attr("validate_shape: bool = true")
      .Attr("use_locking: bool = true")
      .SetAllowsUninitializedInput()
      .NoXlaKernel()
      .SetShapeFn([](InferenceContext& c) {
        c.set_output(0, c.input(1));
        return OkStatus();
      })
      .SetKernel(AssignKernel);
  const char* kNumeric =
      "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
      "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}";
  for (bool subtract : {false, true}) {
    REGISTER_OP(r, subtract ? "AssignSub" : "AssignAdd")
        .Input("ref: Ref(T)")
        .Input("value: T")
        .Output("output_ref: Ref(T)")
        .Attr(kNumeric)
        .Attr("use_locking: bool = false")
        .NoXlaKernel()
        .SetShapeFn(shape_fn::UnchangedShape)
        .SetKernel([subtract](OpKernelContext& c) { return AssignUpdateKernel(c, subtract); });
  }
  REGISTER_OP(r, "IsVariableInitialized")
      .Input("ref: Ref(dtype)")
      .Output("is_initialized: bool")
      .Attr("dtype: type")
      .SetAllowsUninitializedInput()
      .NoXlaKernel()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(IsVariableInitializedKernel);

  REGISTER_OP(r, "VarHandleOp")
      .Output("resource: resource")
      .Attr("container: string = ''")
      .Attr("shared_name: string = ''")
      .Attr("debug_name: string = ''")
      .Attr("dtype: type")
      .Attr("shape: shape")
      .Attr("allowed_devices: list(string) = []")
      .SetIsStateful()
      .NoXlaKernel()
      .SetShapeFn(VarHandleShape)
      .SetKernel(VarHandleKernel);
  REGISTER_OP(r, "ReadVariableOp")
      .Input("resource: resource")
      .Output("value: dtype")
      .Attr("dtype: type")
      .SetIsStateful()
      .SetShapeFn(ReadVariableShape)
      .SetKernel(ReadVariableKernel);
  REGISTER_OP(r, "AssignVariableOp")
      .Input("resource: resource")
      .Input("value: dtype")
      .Attr("dtype: type")
      .Attr("validate_shape: bool = false")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(AssignVariableKernel);
  for (bool subtract : {false, true}) {
    REGISTER_OP(r, subtract ? "AssignSubVariableOp" : "AssignAddVariableOp")
        .Input("resource: resource")
        .Input("value: dtype")
        .Attr("dtype: type")
        .SetIsStateful()
        .SetShapeFn(shape_fn::NoOutputs)
        .SetKernel(
            [subtract](OpKernelContext& c) { return AssignUpdateVariableKernel(c, subtract); });
  }
  REGISTER_OP(r, "VarIsInitializedOp")
      .Input("resource: resource")
      .Output("is_initialized: bool")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(VarIsInitializedKernel);
  REGISTER_OP(r, "DestroyResourceOp")
      .Input("resource: resource")
      .Attr("ignore_lookup_error: bool = true")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(DestroyResourceKernel);
  REGISTER_OP(r, "ResourceGather")
      .Input("resource: resource")
      .Input("indices: Tindices")
      .Output("output: dtype")
      .Attr("batch_dims: int = 0")
      .Attr("validate_indices: bool = true")
      .Attr("dtype: type")
      .Attr("Tindices: {int32, int64}")
      .SetIsStateful()
      .SetShapeFn(ResourceGatherShape)
      .SetKernel(ResourceGatherKernel);
}

}  // namespace xlens::graph
