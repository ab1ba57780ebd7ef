// Runs one op's kernel or shape function outside a session: a node is built in a throwaway graph
// (its inputs unwired) and the registration's kernel is called with an OpKernelContext, so a
// kernel is tested on exactly the tensors given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph::testing {

class LocalKernelRunner {
 public:
  explicit LocalKernelRunner(const OpRegistry* registry) : graph_(registry) {}

  // Adds a node of `op` with `attrs` (defaults added, attrs checked).
  StatusOr<Node*> AddNode(const std::string& op, AttrMap attrs, std::string name = "") {
    NodeDef def;
    def.name = name.empty() ? graph_.NewName(op) : std::move(name);
    def.op = op;
    def.attr = std::move(attrs);
    return graph_.AddNode(std::move(def));
  }

  // Runs the kernel of `node` on `inputs`; the outputs, or the kernel's error.
  StatusOr<std::vector<Tensor>> Run(const Node& node, std::vector<Tensor> inputs,
                                    ResourceMgr* resources = nullptr) {
    if (!node.registration().kernel) return Status::Error("op " + node.type_string() + " has no kernel");
    const size_t n = inputs.size();
    OpKernelContext ctx(node, std::move(inputs), std::vector<bool>(n, false), resources, &state_,
                        nullptr);
    RETURN_IF_ERROR(node.registration().kernel(ctx));
    return ctx.outputs();
  }

  StatusOr<std::vector<Tensor>> Run(const std::string& op, AttrMap attrs,
                                    std::vector<Tensor> inputs) {
    ASSIGN_OR_RETURN(Node * node, AddNode(op, std::move(attrs)));
    return Run(*node, std::move(inputs));
  }

  // Runs the shape function of `op` on input shapes, with the values of the inputs that are
  // known constants (nullptr where not).
  StatusOr<std::vector<PartialShape>> InferShapes(const std::string& op, AttrMap attrs,
                                                  std::vector<PartialShape> shapes,
                                                  std::vector<const Tensor*> values = {}) {
    ASSIGN_OR_RETURN(Node * node, AddNode(op, std::move(attrs)));
    values.resize(shapes.size(), nullptr);
    InferenceContext c(node, &node->attrs(), std::move(shapes), node->input_types(),
                       node->output_types(), std::move(values));
    RETURN_IF_ERROR(node->registration().shape_fn(c));
    return c.outputs();
  }

  Graph& graph() { return graph_; }

 private:
  Graph graph_;
  KernelState state_;
};

}  // namespace xlens::graph::testing
