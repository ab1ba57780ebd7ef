// The dataflow graph: nodes with their op's signature resolved, data edges (src:output ->
// dst:input) and control edges, both ways; built from a GraphDef with every input checked, and
// written back to one. TensorFlow's Graph, with its vocabulary.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/tensor.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class Node;
inline constexpr int kControlSlot = -1;

struct Edge {
  Node* src = nullptr;
  int src_output = 0;  // kControlSlot for a control edge
  Node* dst = nullptr;
  int dst_input = 0;   // kControlSlot for a control edge
  int id = -1;
  bool IsControlEdge() const { return src_output == kControlSlot; }
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name; }
  const std::string& type_string() const { return def_.op; }  // the op
  const std::string& requested_device() const { return def_.device; }
  const AttrMap& attrs() const { return def_.attr; }
  AttrMap& mutable_attrs() { return def_.attr; }
  void set_name(std::string name) { def_.name = std::move(name); }
  void set_requested_device(std::string device) { def_.device = std::move(device); }
  // The NodeDef as imported (its `input` list is rewritten from the edges on export).
  const NodeDef& def() const { return def_; }
  const OpDef& op_def() const { return registration_->op_def; }
  // Whether the registry knows the op (graphs loaded with allow_unknown_ops may hold others).
  bool has_kernel() const { return static_cast<bool>(registration_->kernel); }
  const OpRegistration& registration() const { return *registration_; }

  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const std::vector<DataType>& input_types() const { return input_types_; }
  const std::vector<DataType>& output_types() const { return output_types_; }

  // Edges in insertion order; data edges and control edges mixed (Edge::IsControlEdge).
  const std::vector<const Edge*>& in_edges() const { return in_edges_; }
  const std::vector<const Edge*>& out_edges() const { return out_edges_; }
  // The data edge into input i (nullptr if not connected).
  const Edge* input_edge(int i) const;
  // The node feeding input i and its output index.
  std::pair<Node*, int> input_node(int i) const;

  bool IsSource() const { return id_ == 0; }
  bool IsSink() const { return id_ == 1; }
  bool IsOp() const { return id_ > 1; }
  bool is_stateful() const { return registration_->op_def.is_stateful; }
  // v1 control-flow primitives.
  bool IsSwitch() const;
  bool IsMerge() const;
  bool IsEnter() const;
  bool IsExit() const;
  bool IsNextIteration() const;
  bool IsLoopCond() const;
  bool IsControlFlow() const;

  // Output shapes after shape inference (Graph::InferShapes), unknown before.
  const std::vector<PartialShape>& output_shapes() const { return output_shapes_; }

 private:
  friend class Graph;
  int id_ = -1;
  NodeDef def_;
  const OpRegistration* registration_ = nullptr;
  std::vector<DataType> input_types_, output_types_;
  std::vector<const Edge*> in_edges_, out_edges_;
  std::vector<PartialShape> output_shapes_;
};

struct GraphConstructorOptions {
  // Ops the registry does not know load as nodes without kernels (for `graph print`), instead
  // of being an error.
  bool allow_unknown_ops = false;
  // Where the GraphDef came from, for messages ("model.pbtxt").
  std::string source_name;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* registry = &OpRegistry::Global());
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Builds the graph: resolves every op, adds attr defaults, checks attrs, computes input and
  // output types, wires every input (dangling input, bad index, type mismatch and wrong input
  // count are errors naming the node). Keeps the function library and versions.
  static StatusOr<std::unique_ptr<Graph>> FromGraphDef(const GraphDef& def,
                                                       const GraphConstructorOptions& options = {});
  // Writes the graph back: nodes in id order, inputs from the edges (data inputs in order,
  // then control inputs), unmodeled fields kept.
  GraphDef ToGraphDef() const;

  // Adds a node; its inputs are not wired (use AddEdge). Errors: unknown op, bad attrs,
  // duplicate name.
  StatusOr<Node*> AddNode(NodeDef def);
  const Edge* AddEdge(Node* src, int src_output, Node* dst, int dst_input);
  const Edge* AddControlEdge(Node* src, Node* dst);
  void RemoveEdge(const Edge* edge);
  void RemoveNode(Node* node);
  // Points input `dst_input` of dst at src:src_output instead.
  Status UpdateEdge(Node* src, int src_output, Node* dst, int dst_input);

  Node* source_node() const { return nodes_[0].get(); }
  Node* sink_node() const { return nodes_[1].get(); }
  Node* FindNode(const std::string& name) const;
  // All live op nodes (not _SOURCE/_SINK) in id order.
  std::vector<Node*> op_nodes() const;
  int num_op_nodes() const { return num_op_nodes_; }
  int num_node_ids() const { return static_cast<int>(nodes_.size()); }
  Node* FindNodeId(int id) const { return nodes_[id].get(); }
  int num_edge_ids() const { return static_cast<int>(edges_.size()); }

  // Op nodes in an order where every node comes after its inputs; NextIteration -> Merge back
  // edges of v1 loops are not dependencies. A cycle is an error naming the nodes on it.
  StatusOr<std::vector<Node*>> TopologicalOrder() const;

  // Infers every node's output shapes (Node::output_shapes) in topological order, evaluating
  // small constant subexpressions as TensorFlow's shape refiner does. Errors name the node.
  Status InferShapes();
  // Infers the output shapes of one node from what its inputs' shapes and constant values are
  // now, as TensorFlow's shape refiner does when Python adds an op: the builder calls it for
  // each node it adds, so gradient code sees static shapes at graph-construction time. The
  // inputs must have been wired (and inferred) first.
  Status InferNodeShapes(Node* node);

  // A name not used by any node: `prefix`, or `prefix_1`, `prefix_2`, ...
  std::string NewName(const std::string& prefix);

  const OpRegistry& registry() const { return *registry_; }
  FunctionDefLibrary& library() { return library_; }
  const FunctionDefLibrary& library() const { return library_; }
  VersionDef& versions() { return versions_; }
  const VersionDef& versions() const { return versions_; }
  // A node whose op names a function of the graph's library, or of `library` set here, is a call
  // of that function (function_call_op.h). A function body instantiated without a copy of its
  // caller's library sets the caller's, so nested calls resolve; it is read as nodes are added.
  void set_call_library(const FunctionDefLibrary* library) { call_library_ = library; }

 private:
  // The registry's op, else a call of the library function of that name; null when neither.
  const OpRegistration* FindOp(const std::string& op);
  const OpRegistry* registry_;
  std::vector<std::unique_ptr<Node>> nodes_;  // [0] _SOURCE, [1] _SINK; null after removal
  std::vector<std::unique_ptr<Edge>> edges_;  // null after removal
  std::unordered_map<std::string, Node*> by_name_;
  int num_op_nodes_ = 0;
  FunctionDefLibrary library_;
  VersionDef versions_;
  std::string unmodeled_fields_;
  std::unordered_map<std::string, int> name_counters_;
  // Signatures made up for ops the registry does not know (GraphConstructorOptions).
  std::vector<std::unique_ptr<OpRegistration>> unknown_registrations_;
  const FunctionDefLibrary* call_library_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<OpRegistration>> function_ops_;
  // What shape inference knows beyond shapes, per node id and output: small constant values
  // (for the shape functions of nodes downstream) and the shapes of resource handles.
  using HandleShape = std::optional<std::pair<PartialShape, DataType>>;
  std::vector<std::vector<std::optional<Tensor>>> shape_constants_;
  std::vector<std::vector<HandleShape>> shape_handles_;
};

}  // namespace xlens::graph
