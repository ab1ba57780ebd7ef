// A directed acyclic graph that stays acyclic: edges are inserted only when they create no cycle,
// and an edge can be contracted (its two ends merged into one node) only when that creates none.
// This is the structure TensorFlow's mark_for_compilation clusters with (jit/graphcycles, after
// Pearce and Kelly's dynamic topological sort): every node keeps a rank consistent with the
// edges, so reachability searches stay within the rank interval of the two ends, and the
// clustering visits nodes in post order by rank. Ranks are updated exactly as TensorFlow updates
// them, so the order in which edges are tried (and with it the clusters) is TensorFlow's for the
// same sequence of insertions.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace xlens::cluster {

// A set that remembers insertion order and erases by moving the last element into the hole (so
// iteration order after erasures is TensorFlow's).
class OrderedNodeSet {
 public:
  bool Insert(int32_t value);
  bool Erase(int32_t value);
  bool Contains(int32_t value) const { return index_.count(value) != 0; }
  int Size() const { return static_cast<int>(sequence_.size()); }
  const std::vector<int32_t>& GetSequence() const { return sequence_; }

 private:
  std::vector<int32_t> sequence_;
  std::unordered_map<int32_t, int> index_;
};

class GraphCycles {
 public:
  // Adds a node and returns its id (ids of contracted-away nodes are reused).
  int32_t NewNode();
  // Adds x -> y unless it would create a cycle (then returns false and changes nothing). An edge
  // that exists already is accepted.
  bool InsertEdge(int32_t x, int32_t y);
  void RemoveEdge(int32_t x, int32_t y);
  bool HasEdge(int32_t x, int32_t y) const;
  // Merges the ends of the edge a -> b into one node unless another path from a to b exists
  // (then the graph is unchanged and nullopt is returned). Returns the id that remains: the end
  // with more edges keeps its id, as in TensorFlow.
  std::optional<int32_t> ContractEdge(int32_t a, int32_t b);
  // Whether y can be reached from x (x == y counts).
  bool IsReachable(int32_t x, int32_t y);

  std::vector<int32_t> Successors(int32_t node) const;
  std::vector<int32_t> Predecessors(int32_t node) const;
  // Live nodes, each after all its successors (by decreasing rank).
  std::vector<int32_t> AllNodesInPostOrder() const;
  // A path from x to y (both included), empty if none; for messages.
  std::vector<int32_t> FindPath(int32_t x, int32_t y) const;
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  bool IsFree(int32_t node) const;

 private:
  struct Node {
    int32_t rank = 0;
    bool visited = false;
    OrderedNodeSet in, out;
  };
  bool ForwardDfs(int32_t n, int32_t upper_bound);
  void BackwardDfs(int32_t n, int32_t lower_bound);
  void Reorder();
  void SortByRank(std::vector<int32_t>* delta) const;
  void MoveToList(std::vector<int32_t>* src, std::vector<int32_t>* dst);
  void ClearVisited(const std::vector<int32_t>& nodes);

  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  // Scratch space of the searches.
  std::vector<int32_t> deltaf_, deltab_, list_, merged_, stack_;
};

}  // namespace xlens::cluster
