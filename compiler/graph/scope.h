// The builder API, in the spirit of TensorFlow's C++ API: a Scope names and places the nodes it
// adds (sub-scopes give "gradients/Mean_grad/Shape"), carries control dependencies, a device and
// a jit scope, and remembers the first error so a chain of ops:: calls is checked once.
//
//   Scope root = Scope::NewRootScope();
//   auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 784}));
//   auto y = ops::MatMul(root, x, w);
//   RETURN_IF_ERROR(root.status());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

// One output of a node.
struct Output {
  Node* node = nullptr;
  int index = 0;
  Output() = default;
  Output(Node* n, int i = 0) : node(n), index(i) {}  // NOLINT: implicit like TF's Output
  bool valid() const { return node != nullptr; }
  DataType type() const;
  std::string name() const;  // "node" or "node:1"
  bool operator==(const Output& o) const { return node == o.node && index == o.index; }
};

class Scope {
 public:
  // A scope over a new, empty graph that the scope (and its copies) own.
  static Scope NewRootScope();
  // A scope adding to an existing graph (not owned).
  static Scope ForGraph(Graph* graph);

  Scope WithOpName(const std::string& name) const;           // exact name of the next node
  Scope NewSubScope(const std::string& name) const;          // "parent/name" prefix, uniquified
  Scope WithControlDependencies(const std::vector<Output>& deps) const;
  Scope WithControlDependencies(const std::vector<Node*>& deps) const;
  Scope WithNoControlDependencies() const;
  Scope WithDevice(const std::string& device) const;
  // Nodes added get _XlaCompile=compile and _XlaScope=scope_name (tf.xla.experimental.jit_scope).
  Scope WithXlaScope(bool compile, const std::string& scope_name) const;

  Graph* graph() const { return graph_; }
  std::shared_ptr<Graph> graph_as_shared_ptr() const { return owned_graph_; }
  Status status() const { return *status_; }
  bool ok() const { return status_->ok(); }
  void UpdateStatus(const Status& s) const;

  // "prefix/name" for a node: the WithOpName name if set, else `default_name` made unique in
  // this prefix ("Const", "Const_1", ...), as TensorFlow names ops.
  std::string GetUniqueNameForOp(const std::string& default_name) const;
  const std::string& name_prefix() const { return prefix_; }

  // Opens the name scope a TensorFlow Python op wrapper opens: `default_name` made unique as a
  // sub-scope ("Reshape", "Reshape_1"). Nodes made for the op's constant inputs go in
  // `*inputs_scope` ("Reshape/shape"); the returned scope names its next node exactly the
  // sub-scope ("Reshape"). WithOpName's name, when set, is used instead of `default_name`.
  Scope NewOpScope(const std::string& default_name, Scope* inputs_scope) const;

  // Adds a node of `op` with `inputs` wired to its inputs in order (list inputs flattened) and
  // `attrs`; attrs the op derives from its inputs (T, N, Tidx, ...) are inferred when not given.
  // On error records it in the scope and returns nullptr.
  Node* AddNode(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs,
                const std::string& default_name = "") const;

 private:
  Scope() = default;
  struct NameTable;  // names and scopes in use, shared by every scope of a graph
  std::shared_ptr<Graph> owned_graph_;
  Graph* graph_ = nullptr;
  std::shared_ptr<Status> status_;
  std::string prefix_;      // "gradients/Mean_grad"
  std::shared_ptr<NameTable> names_;
  std::string op_name_;     // from WithOpName (applies to the next node only)
  std::string exact_name_;  // from NewOpScope: already unique
  // Each WithControlDependencies call opens a frame, as Python's control_dependencies does: a
  // node gets a frame's dependencies unless one of its inputs was made inside that frame.
  struct ControlFrame {
    int id = 0;
    std::vector<Node*> deps;
  };
  std::vector<ControlFrame> control_frames_;
  std::string device_;
  bool has_xla_scope_ = false;
  bool xla_compile_ = false;
  std::string xla_scope_;
};

}  // namespace xlens::graph
