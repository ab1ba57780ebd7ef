// What the clustering passes ask of a graph, in TensorFlow's terms (jit/xla_cluster_util.h): the
// loop frame of every node, the cycle-detection graph that keeps clusters from creating cycles,
// which ops touch resource variables and how, and the small op classes the passes single out.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/cluster/graph_cycles.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// The while-loop frame a node runs in: "" outside every loop; Enter starts the frame named by its
// frame_name attr, Exit returns to the parent frame.
struct ControlFlowInfo {
  std::string frame_name;
  std::string parent_frame;
};

// One entry per node id (removed ids hold empty names). A node reached from two frames is an
// error naming it.
StatusOr<std::vector<ControlFlowInfo>> BuildControlFlowInfo(const graph::Graph& graph);

// The graph TensorFlow checks merges against: one node per graph node id (ids equal), plus one
// per loop frame standing for the whole loop (edges into Enter and out of Exit are lifted to the
// frame's node, NextIteration back edges dropped), so a loop body is disconnected from the
// enclosing graph. Edges are inserted in the order TensorFlow inserts them: the graph's edges by
// id, then the _SOURCE and _SINK control edges TensorFlow's FixupSourceAndSinkEdges adds. A cycle
// that does not go through a NextIteration is an error naming its nodes.
Status CreateCycleDetectionGraph(const graph::Graph& graph,
                                 const std::vector<ControlFlowInfo>& frames, GraphCycles* cycles);

// The edges of the graph as TensorFlow sees them after FixupSourceAndSinkEdges: real edges, then
// _SOURCE -> each op node without inputs, then each op node without outputs -> _SINK.
struct SimpleEdge {
  const graph::Node* src;
  int src_output;
  const graph::Node* dst;
  int dst_input;
  bool IsControlEdge() const { return src_output == graph::kControlSlot; }
};
std::vector<SimpleEdge> EdgesWithSourceAndSink(const graph::Graph& graph);
// The in-edges of `node` as TensorFlow counts them (with the _SOURCE edge of a node that has no
// inputs).
std::vector<SimpleEdge> InEdgesWithSource(const graph::Node& node);

// TensorFlow's Node::IsIdentity / IsConstant.
bool IsIdentity(const graph::Node& node);
bool IsConstant(const graph::Node& node);
// Shape, Rank and Size: ops that read only the shape of their input.
bool IsShapeConsumerOp(const graph::Node& node);
bool HasResourceInputOrOutput(const graph::Node& node);
// Whether the node calls a function of the graph's library (a call node, or a func attr).
bool MayCallFunction(const graph::Node& node, const graph::Graph& graph);

// How a resource operation touches its variable (tf2xla's resource_operation_table).
enum class XlaResourceOpKind { kRead, kWrite, kReadWrite };
// nullopt for ops that are not resource variable operations.
std::optional<XlaResourceOpKind> ResourceOpKindFor(const std::string& op);

// The _XlaCluster attr of a node, if it has one.
std::optional<std::string> GetXlaClusterForNode(const graph::Node& node);
void RemoveFromXlaCluster(graph::Node* node);
// A bool attr of the node (false when absent).
bool GetBoolAttr(const graph::Node& node, const std::string& name);
std::string GetStringAttr(const graph::Node& node, const std::string& name);

}  // namespace xlens::cluster
